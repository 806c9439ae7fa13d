"""Compare page (``/compare?runs=a,b&metric=loss&x=elapsed``): one metric of several runs
overlaid, aligned by step or by elapsed time, refreshed live."""

import streamlit as st

if not __package__:  # Streamlit runs a page as a script, outside any package
    from itertools import takewhile
    from pathlib import Path

    # name the package this page's folder sits in (app.dashboard in a checkout,
    # cliffwatch.app.dashboard when installed) so the relative imports below reach the modules
    # the server loaded; the folder's own name is not part of it (it has no __init__.py)
    __package__ = ".".join(reversed([p.name for p in takewhile(
        lambda p: (p / "__init__.py").is_file(), Path(__file__).resolve().parents[1:])]))

from . import backend, banner, charts, export, picker, reads, url, wording

ALIGN = ("step", "elapsed")


def write_param(name: str, key: str) -> None:
    url.set_params(**{name: st.session_state[key]})


def pick() -> tuple[list[str], str, str] | None:
    """Runs, metric and alignment from the URL, shown in widgets that write back to it. The
    runs offered are those chosen plus the first matches of the search box, never every run."""
    wanted = url.parse_list(st.query_params, "runs")
    unknown = [r for r in wanted if not reads.run_exists(r)]
    if unknown:
        st.warning(f"No run named {wording.md(', '.join(unknown))}; the Runs page lists every run.")
    state = st.session_state
    state["k-runs"] = [r for r in wanted if r not in unknown]
    left, right = st.columns([2, 3])
    with left:
        q = picker.search_box("k-q")
    with right:
        st.multiselect("runs", picker.matches(q, keep=state["k-runs"]), key="k-runs",
                       on_change=write_param, args=("runs", "k-runs"))
    chosen = state["k-runs"]
    picker.remember(chosen[-1] if chosen else None)
    if not chosen:
        st.info("Pick two or more runs to overlay (the URL keeps them: /compare?runs=a,b).")
        return None
    metrics = sorted({m for r in chosen for m in reads.metric_names(r, reads.version(r))})
    metric = st.query_params.get("metric") or ("loss" if "loss" in metrics else metrics[0])
    if metric not in metrics:
        st.warning(f"None of these runs has metric {wording.md(repr(metric))}; showing "
                   f"{wording.md(metrics[0])}.")
        metric = metrics[0]
    align = st.query_params.get("x") if st.query_params.get("x") in ALIGN else "step"
    state["k-metric"], state["k-x"] = metric, align
    left, right = st.columns([3, 2])
    left.selectbox("metric", metrics, key="k-metric", on_change=write_param,
                   args=("metric", "k-metric"))
    right.radio("align by", ALIGN, key="k-x", horizontal=True, on_change=write_param,
                args=("x", "k-x"), help="step: the same optimizer step; elapsed: seconds "
                "since each run (attempt) started")
    return chosen, metric, align


@st.fragment(run_every=backend.REFRESH_S)
def live(chosen: list[str], metric: str, align: str) -> None:
    frames, stood, missing = {}, {}, []  # stood: run -> its metric drawn for ``metric``
    watch = backend.watch()
    for run in chosen:
        ver = reads.version(run)
        names = reads.metric_names(run, ver)
        drawn = metric if metric in names else watch.stand_in(metric, names)
        frame = reads.series(run, ver, (drawn,), None, None, align).frame if drawn else None
        if frame is None or frame.empty:
            missing.append(run)
        elif drawn == metric:
            frames[run] = frame
        else:  # drawn as ``metric``, named in the legend: "tb-run (train/loss)"
            stood[run] = drawn
            frames[f"{run} ({drawn})"] = frame.assign(metric=metric)
    if not frames:
        st.info(f"No values of {wording.md(metric)} yet in {wording.md(', '.join(chosen))}.")
        return
    spec = charts.vega_lite(charts.compare_chart(frames, metric, x=align))
    st.vega_lite_chart(spec=spec, width="stretch", height=charts.compare_height(len(frames)),
                       alt=f"{metric} of {', '.join(frames)}")
    st.download_button("PNG", data=lambda: export.png(spec), file_name=f"compare-{metric}.png",
                       mime="image/png", on_click="ignore", help="download the chart as an image")
    for run, drawn in stood.items():
        st.caption(f"{wording.md(run)} logs no {wording.md(metric)}: drawn is its "
                   f"{wording.md(drawn)}, which diagnosis reads as the same kind.")
    if missing:
        st.caption(f"No {wording.md(metric)} in {wording.md(', '.join(missing))}.")


def page() -> None:
    backend.state()
    st.title("Compare runs")
    banner.health_warning()
    if not reads.have_runs():
        backend.no_runs_yet()
        return
    picked = pick()
    if picked:
        live(*picked)


backend.guarded(page)
