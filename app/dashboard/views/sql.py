"""SQL page (``/sql?q=SELECT+count(*)+FROM+metrics&p_run=demo``): ad-hoc read-only SQL
through the same helper, limits and ad-hoc slots as ``POST /api/sql``; the named queries of
queries/ as starting points. The query (and any ``$parameter`` values) live in the URL, so a
link fills the editor again; it runs only when Run is pressed (a link from anywhere must not
run SQL on the reader's behalf).

A one-value result is also shown as a number::

    count_star()
    2230
"""

import re

import duckdb
import pandas as pd
import streamlit as st

if not __package__:  # Streamlit runs a page as a script, outside any package
    from itertools import takewhile
    from pathlib import Path

    # name the package this page's folder sits in (app.dashboard in a checkout,
    # cliffwatch.app.dashboard when installed) so the relative imports below reach the modules
    # the server loaded; the folder's own name is not part of it (it has no __init__.py)
    __package__ = ".".join(reversed([p.name for p in takewhile(
        lambda p: (p / "__init__.py").is_file(), Path(__file__).resolve().parents[1:])]))

from ..db import queries
from ..db.readonly import run_readonly
from ..errors import CliffwatchError
from ..state import ADHOC_SLOTS
from . import backend, charts, export, picker, url, wording

PARAM = re.compile(r"\$([A-Za-z_]\w*)")
PARAM_PREFIX = "p_"


def start_from(name: str) -> None:
    """The named query's text into the editor and the URL: its examples into its params, but
    ``$run`` is the run this session last looked at, else the newest (the example run,
    'seed-cliff', is seldom one the reader has: issue 20, item 9)."""
    if not name:
        return
    query = queries.load(name)
    values = {f"{PARAM_PREFIX}{p.name}": (p.example or "").strip("'") or None
              for p in query.params.values()}
    if "run" in query.params:
        values[f"{PARAM_PREFIX}run"] = picker.last_run() or values[f"{PARAM_PREFIX}run"]
    url.set_params(q=query.sql.strip(), **values)


def write_query() -> None:
    url.set_params(q=st.session_state["s-q"])


def write_value(name: str) -> None:
    url.set_params(**{PARAM_PREFIX + name: st.session_state["s-p-" + name]})


def typed(name: str, text: str, query) -> object:
    """A parameter's text as its named query types it, else a number when it reads as one."""
    if query is not None and name in query.params:
        return query.params[name].convert(text)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None if text.lower() == "null" else text


def named_picker() -> queries.Query | None:
    names = queries.names()
    chosen = st.query_params.get("query")
    current = queries.load(chosen) if chosen in names else None
    label = {n: f"{n}: {queries.load(n).title}" for n in names}
    pick = st.selectbox("start from a named query", ["", *names], format_func=lambda n:
                        label.get(n, "(write your own)"), index=0, key="s-named",
                        help=current.description if current else
                        "the queries cliffwatch itself runs, from queries/*.sql")
    if pick and pick != chosen:
        url.set_params(query=pick)
        start_from(pick)
        st.rerun()
    if current is not None and current.description:
        st.caption(current.description)
    return current


def params(text: str, query) -> dict:
    """An input for each $parameter the text names; the values bound (never pasted in)."""
    names = list(dict.fromkeys(PARAM.findall(text)))
    values = {}
    cols = st.columns(max(1, min(len(names), 4)))
    for i, name in enumerate(names):
        st.session_state["s-p-" + name] = st.query_params.get(PARAM_PREFIX + name, "")
        hint = query.params[name].help if query is not None and name in query.params else None
        raw = cols[i % len(cols)].text_input(f"${name}", key="s-p-" + name, help=hint,
                                             on_change=write_value, args=(name,))
        values[name] = typed(name, raw, query)
    return values


def result_frame(result) -> pd.DataFrame:
    """Rows as a frame; repeated column names (SELECT 1, 1) get a suffix a table can show."""
    seen: dict[str, int] = {}
    names = []
    for col in result.columns:
        seen[col] = seen.get(col, 0) + 1
        names.append(col if seen[col] == 1 else f"{col}_{seen[col]}")
    return pd.DataFrame.from_records(result.rows, columns=names)


def show(result) -> None:
    frame = result_frame(result)
    note = result.truncation_message()
    if note:
        st.warning(wording.md(note))
    if frame.shape == (1, 1):
        st.metric(wording.md(frame.columns[0]), wording.md(frame.iat[0, 0]))
    st.caption(f"{len(frame)} row(s) in {result.elapsed_s:.3f} s")
    st.dataframe(frame, hide_index=True, width="stretch")
    chart = charts.quick_chart(frame) if len(frame) > 1 else None
    if chart is not None:
        spec = charts.vega_lite(chart)
        st.vega_lite_chart(spec=spec, width="stretch", alt="quick chart of the result")
        st.download_button("PNG", data=lambda: export.png(spec), file_name="query.png",
                           mime="image/png", on_click="ignore",
                           help="download the chart as an image")
    st.download_button("Download CSV", frame.to_csv(index=False), file_name="query.csv",
                       mime="text/csv", on_click="ignore")


PRESSED = "s-pressed"  # session state: the query and values Run was last pressed for


def run(text: str, values: dict) -> None:
    """The query in one of the ad-hoc slots /api/sql takes. The wait is bounded: this script
    thread cannot be interrupted while it waits."""
    state = backend.state()
    settings = state.settings
    if not state.adhoc_slots.take(wait_s=settings.sql_time_limit):
        st.warning(f"{ADHOC_SLOTS} ad-hoc queries are already running (this page and "
                   "/api/sql share them); press Run again when they finish.")
        return
    try:
        result = run_readonly(backend.cursor(), text, params=values or None,
                              max_rows=settings.sql_max_rows,
                              time_limit=settings.sql_time_limit,
                              max_bytes=settings.sql_max_bytes)
    except (CliffwatchError, duckdb.Error) as exc:
        st.error(wording.md(exc))
        return
    finally:
        state.adhoc_slots.release()
    show(result)


def run_if_pressed(text: str, values: dict, pressed: bool) -> None:
    """Run the query once Run was pressed for it (and again on reruns while it stays the
    same); a query that came with the URL waits for the press."""
    if pressed:
        st.session_state[PRESSED] = (text, values)
    if not text:
        return
    if st.session_state.get(PRESSED) == (text, values):
        run(text, values)
    else:
        st.caption("Press Run to run this query.")


def page() -> None:
    backend.state()
    st.title("SQL")
    st.caption("Read-only SQL on the monitor's database (tables and views: metrics, "
               "metrics_all, events, runs, incidents, ...). Results stop at --sql-max-rows.")
    query = named_picker()
    st.session_state["s-q"] = st.query_params.get("q", "")
    st.text_area("query", key="s-q", height=160, on_change=write_query,
                 placeholder="SELECT run, max(step) FROM metrics GROUP BY run")
    pressed = st.button("Run", type="primary", on_click=write_query)
    text = st.query_params.get("q", "").strip()
    run_if_pressed(text, params(text, query) if text else {}, pressed)


backend.guarded(page)
