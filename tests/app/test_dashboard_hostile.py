"""The dashboard against hostile text: run names (folder names) and URL parameters that are
Markdown. Streamlit renders st.title/st.error/st.warning/st.info/st.metric as Markdown, so
``/run?run=![](https://evil.example/p.png)`` used to load an image from another host and
``metrics=[login](https://evil.example)`` to show a link whose target the reader cannot see.
Every page must show such text as typed (escaped), through AppTest on a real database.
"""

from __future__ import annotations

import re

import pytest
import streamlit as st

from app import state
from app.dashboard.url import parse_run_view, run_url
from app.dashboard.wording import md
from tests.app.test_dashboard_pages import page, press_run, serve_in_process, texts

LINK = "[login](https://evil.example)"
IMAGE = "![](https://evil.example/p.png)"
RUNS = ["[x](javascript:alert(1))", "**bold**", "<img src=x onerror=alert(1)>", "a b&c?d#e"]
# a Markdown link or image the renderer would act on: "](" not preceded by a backslash
ACTIVE = re.compile(r"(?<!\\)\]\(|(?<!\\)\*\*")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    logs = tmp_path_factory.mktemp("hostile") / "logs"
    for name in [*RUNS, "plain"]:
        (logs / name).mkdir(parents=True)
        (logs / name / "metrics.jsonl").write_text(
            "".join(f'{{"step": {s}, "loss": {1 / s}}}\n' for s in range(1, 20)))
    monitor = serve_in_process(logs)
    yield monitor
    state.set_current(None)
    st.cache_data.clear()
    monitor.close()


def shown(at) -> list[str]:
    """The Markdown bodies of every element that renders Markdown."""
    out = [str(e.value) for kind in ("title", "error", "warning", "info", "success", "caption")
           for e in getattr(at, kind)]
    return out + [f"{m.label} {m.value}" for m in at.metric]


def assert_inert(at) -> None:
    active = [text for text in shown(at) if ACTIVE.search(text)]
    assert not active, active


def test_md_shows_markdown_as_typed():
    assert md(f"**x** {LINK}") == r"\*\*x\*\* \[login\]\(https://evil.example\)"
    assert md(IMAGE).startswith(r"\!\[\]\(")
    assert md("- item\n# head") == r"\- item \# head"  # one line, no list, no heading
    assert md("lr-0.1 no-such-run") == "lr-0.1 no-such-run"  # plain names stay readable


def test_run_page_url_parameters_show_as_text(hostile):
    at = page("views/run.py", run=IMAGE + LINK)
    assert "No run named" in texts(at.error)
    assert_inert(at)
    at = page("views/run.py", run="plain", metrics=f"{LINK},loss", x=LINK, smooth=LINK,
              **{"from": LINK})
    assert "no metric" in texts(at.warning) and "x must be one of" in texts(at.warning)
    assert_inert(at)


@pytest.mark.parametrize("run", RUNS)
def test_a_hostile_run_name_is_the_run_page_title_as_typed(hostile, run):
    at = page("views/run.py", run=run, metrics="loss,nope")
    assert at.title[0].value == md(run)
    assert_inert(at)


def test_compare_incidents_and_sql_show_hostile_text_as_typed(hostile):
    assert_inert(page("views/compare.py", runs=f"{LINK},plain", metric=LINK))
    assert_inert(page("views/incidents.py", run=LINK))
    at = press_run(page("views/sql.py", q="SELECT $v AS \"**c**\"", p_v=LINK))
    assert at.metric[0].value == md(LINK)
    assert_inert(at)
    assert_inert(press_run(page("views/sql.py", q=f"SELECT * FROM {LINK}")))  # the error quotes it


def test_a_step_too_large_for_a_step_is_explained():
    view = parse_run_view({"run": "plain", "to": "1e99"})
    assert view.hi is None
    assert "to must be a whole step number" in view.problems[0]


def test_a_run_link_keeps_spaces_readable_in_the_runs_table():
    # the Runs table shows the link's run=... decoded: "+" would stay a "+"
    assert run_url("a b&c?d#e") == "./run?run=a%20b%26c%3Fd%23e"
