"""Runs a page at a time (issue 12: a team's folder of 10,000 runs): ``/api/runs`` pages and
filters (live first, then the most recently written, then by name; a name search, a status
filter), says what a bad parameter should be, and reads only the page's runs; the Runs page
in headless Chromium shows live runs first, its search box filters and Next turns the page.

One server over RUNS generated runs for the API and the browser (building 10,000 in a test is
too slow; bench/fleet.py measures that): small pages (limit=7, limit=10) make paging visible.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
import streamlit as st

from app import settings as settings_mod
from app import state
from app.dashboard import reads
from app.db import queries
from app.monitor import Monitor
from app.read import runs as runs_mod
from tests.conftest import Server

RUNS = 60
LIVE = {i for i in range(RUNS) if i % 10 == 3}  # 6 runs without run_end


def name(i: int) -> str:
    return f"sweep{i % 3}-run{i:03d}"


def write_runs(logs: Path, count: int = RUNS) -> list[str]:
    """``count`` tiny runs, each last written a minute after the one before (run i at base +
    i minutes), the LIVE ones without run_end; their names in the order the Runs table and
    /api/runs list them: live first, then the most recently written."""
    base = time.time() - 86_400
    for i in range(count):
        folder = logs / name(i)
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text("".join(
            json.dumps({"step": s, "loss": 1.0 / s, "elapsed_s": s * 2.0}) + "\n"
            for s in range(1, 4)))
        if i not in LIVE:
            (folder / "events.jsonl").write_text(json.dumps(
                {"event": "run_end", "step": 3, "status": "completed"}) + "\n")
        for file in folder.iterdir():
            os.utime(file, (base + 60 * i, base + 60 * i))
    newest_first = sorted(range(count), reverse=True)
    return ([name(i) for i in newest_first if i in LIVE]
            + [name(i) for i in newest_first if i not in LIVE])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    logs = tmp_path_factory.mktemp("fleet") / "logs"
    order = write_runs(logs)
    server = Server(logs)
    server.order = order
    yield server
    server.stop()


def get(server, **params) -> httpx.Response:
    return httpx.get(server.url + "/api/runs", params=params, timeout=30)


def test_first_page_is_live_runs_first_then_the_most_recently_written(fleet):
    body = get(fleet).json()
    assert (body["total"], body["limit"], body["offset"], body["next"]) == (RUNS, 50, 0, 50)
    assert [r["run"] for r in body["runs"]] == fleet.order[:50]
    assert [r["status"] for r in body["runs"][:len(LIVE)]] == ["running"] * len(LIVE)
    # the figures /api/runs always gave, now for the page's runs only
    first = body["runs"][0]
    assert (first["lines"], first["last_step"], first["attempts"], first["errors"]) == (
        3, 3, 1, 0)
    assert first["last_elapsed_s"] == 6.0


def test_paging_with_next_visits_every_run_once_in_order(fleet):
    seen, offset, pages = [], 0, 0
    while offset is not None:
        body = get(fleet, limit=7, offset=offset).json()
        assert body["total"] == RUNS and len(body["runs"]) <= 7
        seen += [r["run"] for r in body["runs"]]
        offset, pages = body["next"], pages + 1
    assert seen == fleet.order and pages == 9
    past = get(fleet, offset=RUNS + 5).json()
    assert (past["runs"], past["total"], past["next"]) == ([], RUNS, None)


@pytest.mark.parametrize(("params", "expect"), [
    ({"q": "sweep1"}, lambda n: n.startswith("sweep1-")),
    ({"q": "SWEEP1-RUN0"}, lambda n: n.startswith("sweep1-run0")),  # any case
    ({"q": "sweep2-run0[0-2]*"}, lambda n: re.fullmatch(r"sweep2-run0[0-2]\d", n)),  # a glob
    ({"q": "_"}, lambda n: "_" in n),  # not a LIKE wildcard: no name has one
    ({"q": "%"}, lambda n: "%" in n),
    ({"status": "live"}, lambda n: int(n[-3:]) in LIVE),
    ({"status": "finished"}, lambda n: int(n[-3:]) not in LIVE),
    ({"status": "all", "q": "run05"}, lambda n: "run05" in n),
    ({"status": "live", "q": "sweep0"}, lambda n: int(n[-3:]) in LIVE and "sweep0" in n),
], ids=["part", "any-case", "glob", "underscore", "percent", "live", "finished", "all",
        "live-and-part"])
def test_filters_keep_the_order(fleet, params, expect):
    body = get(fleet, limit=1000, **params).json()
    want = [n for n in fleet.order if expect(n)]
    assert [r["run"] for r in body["runs"]] == want and body["total"] == len(want)


@pytest.mark.parametrize(("params", "says"), [
    ({"limit": "0"}, "limit must be a whole number from 1 to 1000, not '0'"),
    ({"limit": "abc"}, "limit must be a whole number"),
    ({"limit": "5000"}, "page on with offset"),
    ({"offset": "-1"}, "offset must be a whole number, 0 or more, not '-1'"),
    ({"status": "stalled"}, "status must be one of all, live, finished"),
    ({"q": "run[0"}, "is not a valid glob"),
])
def test_a_bad_parameter_is_a_400_that_says_what_to_send(fleet, params, says):
    response = get(fleet, **params)
    assert response.status_code == 400 and says in response.json()["error"]


class Counting:
    """A DuckDB cursor that notes the text of every statement run on it."""

    def __init__(self, cursor):
        self.cursor, self.texts = cursor, []

    def execute(self, sql, *args):
        self.texts.append(sql)
        return self.cursor.execute(sql, *args)

    def __getattr__(self, attr):
        return getattr(self.cursor, attr)

    def ran(self, name: str) -> int:
        return self.texts.count(queries.load(name).text())


def test_a_page_reads_only_its_own_runs(tmp_path):
    logs = tmp_path / "logs"
    order = write_runs(logs, 12)
    with Monitor.open(logs, settings_mod.resolve()) as monitor:
        monitor.tailer.catch_up()
        cursor = Counting(monitor.db.cursor())
        ask = runs_mod.Ask(limit=3, offset=3)
        body = runs_mod.api_page(cursor, ask)
        assert [r["run"] for r in body["runs"]] == order[3:6] and body["next"] == 6
        # two statements whatever the number of runs: the page, then its runs' figures
        assert len(cursor.texts) == 2 and cursor.ran("read/runs_stats") == 1
        cursor.texts.clear()
        page = runs_mod.page(cursor, ask)
        assert list(page.table["run"]) == order[3:6] and page.total == 12
        assert cursor.ran("read/runs_tail") == 3  # the newest lines of the 3 runs shown
        assert not any("metrics_all" in text for text in cursor.texts)
        # refreshed, the page reads no run's lines again until ingest stores some
        tails, now = runs_mod.Tails(), time.time()
        first = runs_mod.page(cursor, ask, now, tails=tails).table
        cursor.texts.clear()
        assert runs_mod.page(cursor, ask, now, tails=tails).table.equals(first)
        assert cursor.ran("read/runs_tail") == 0 and cursor.ran("read/runs_file_end") == 0
        grown = logs / order[4] / "metrics.jsonl"
        stamp = grown.stat().st_mtime
        with grown.open("a") as handle:
            handle.write(json.dumps({"step": 4, "loss": 0.25, "elapsed_s": 8.0}) + "\n")
        os.utime(grown, (stamp, stamp))  # the same place in the order
        monitor.tailer.catch_up()
        cursor.texts.clear()
        table = runs_mod.page(cursor, ask, now, tails=tails).table.set_index("run")
        assert cursor.ran("read/runs_tail") == 1  # only the run that grew
        assert (table.loc[order[4], "last_step"], table.loc[order[4], "lines"]) == (4, 4)
        assert table.loc[order[4], "last_loss"] == 0.25


# ---- the Runs page in headless Chromium ------------------------------------------------------



def shown_runs(page, total: int, first: int, last: int, want: list[str]) -> list[str]:
    """The run names of the table once the caption under it says it shows runs first..last
    of total (the grid draws its cells a moment later: read until they are ``want``, or for
    15 s)."""
    page.get_by_text(re.compile(rf"^{total} run\(s\) in .*; showing {first}–{last},")
                     ).first.wait_for(timeout=30_000)
    cells = page.locator("[data-testid=stDataFrame] td")
    deadline = time.monotonic() + 15
    while True:
        links = [c for c in cells.all_inner_texts() if c.startswith("./run?run=")]
        names = [link.removeprefix("./run?run=") for link in links]
        if names == want or time.monotonic() > deadline:
            return names
        time.sleep(0.2)


def test_runs_page_pages_live_first_and_its_search_box_filters(browser, fleet, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    try:
        page.goto(f"{fleet.url}/?limit=10")
        assert shown_runs(page, RUNS, 1, 10, fleet.order[:10]) == fleet.order[:10]
        page.get_by_role("button", name="Next").click()
        want = fleet.order[10:20]
        assert shown_runs(page, RUNS, 11, 20, want) == want
        assert parse_qs(urlparse(page.url).query)["offset"] == ["10"]
        box = page.get_by_placeholder("part of a run name")
        box.fill("sweep1")
        box.press("Enter")
        matching = [n for n in fleet.order if n.startswith("sweep1")]
        want = matching[:10]
        assert shown_runs(page, len(matching), 1, 10, want) == want
        query = parse_qs(urlparse(page.url).query)
        assert query["q"] == ["sweep1"] and "offset" not in query  # back to the first page
        page.get_by_text("live", exact=True).click()
        live = [n for n in matching if int(n[-3:]) in LIVE]
        assert shown_runs(page, len(live), 1, len(live), live) == live
    finally:
        page.screenshot(path=str(tmp_path / "runs-page.png"), full_page=True)
        page.close()


# ---- run pickers: a search box and the first matches, never every run ------------------------

@pytest.fixture(scope="module")
def many(tmp_path_factory):
    from tests.app.test_dashboard_pages import serve_in_process

    logs = tmp_path_factory.mktemp("many") / "logs"
    order = write_runs(logs)
    monitor = serve_in_process(logs)
    yield order
    state.set_current(None)
    st.cache_data.clear()
    monitor.close()


def test_run_page_picker_offers_the_first_matches_and_its_search_narrows_them(many):
    from tests.app.test_dashboard_pages import page, texts

    at = page("views/run.py")
    picker = at.selectbox[0]
    assert len(picker.options) < RUNS  # not every run
    assert list(picker.options) == many[:reads.PICKS]  # the first of the Runs page's order
    assert f"{reads.PICKS} of {RUNS} runs" in texts(at.caption)
    at.text_input(key="r-q").input("sweep1").run()
    assert list(at.selectbox[0].options) == [n for n in many if n.startswith("sweep1")]
    at.selectbox[0].set_value(many[1]).run()
    assert at.query_params["run"] == many[1]


def test_compare_and_incidents_offer_the_chosen_run_and_the_first_matches(many):
    from tests.app.test_dashboard_pages import page

    chosen = many[-1]  # the last run listed: not among the first matches
    at = page("views/compare.py", runs=chosen)
    options = list(at.multiselect(key="k-runs").options)
    assert options[0] == chosen and len(options) == reads.PICKS + 1
    at = page("views/incidents.py", run=chosen)
    options = list(at.selectbox(key="i-run").options)
    assert options[:2] == ["every run", chosen] and len(options) == reads.PICKS + 2


def test_runs_page_explains_a_bad_parameter_and_a_page_past_the_end(many):
    from tests.app.test_dashboard_pages import page, texts

    at = page(limit="0")
    assert "limit must be a whole number from 1 to 1000, not '0'" in texts(at.warning)
    assert at.dataframe[0].value["run"].tolist() == many[:25]  # the first page, as by default
    at = page(offset="500")
    assert f"past the last of {RUNS} run(s)" in texts(at.info)
    at.button(key="runs-prev").click().run()
    assert at.dataframe[0].value["run"].tolist() == many[RUNS - 25:]


def test_alerts_silence_form_takes_a_run_glob_instead_of_listing_every_run(many):
    from tests.app.test_dashboard_pages import page, texts

    at = page("views/alerts.py")
    assert all(len(box.options) < RUNS for box in at.selectbox)  # no list of every run
    next(box for box in at.text_input if box.label == "run").input("sweep1-*")
    next(b for b in at.button if b.label == "Silence").click().run()
    assert "on sweep1-\\* for 2h" in texts(at.success), texts(at.error)
