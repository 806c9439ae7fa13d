"""The Runs, Incidents, Alerts, Compare and SQL pages in headless Chromium against the real
server (issue 20, items 4, 7, 8 and 9; issue 19, section 1: the files not read).

One server for the module, on a log directory holding the seed run (our own trainer), an
llm.c ``main.log`` with a long name and a NaN (another trainer), a Hugging Face state beside
LLaMA-Factory's log of the same run (one of them is read), a folder whose only file is prose
(no log), a FIFO where a log should be (not a regular file), and a run that logged a line a
second and then stopped 88 s before the server started. A screenshot of each page lands in
the test's tmp dir.

Streamlit's tables are canvases; the grid also writes its cells into a hidden accessible
table, which is what ``grid_rows`` reads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import httpx
import pytest

from app.dashboard.charts import RUN_COLORS
from app.read import runs
from tests.app.test_dashboard_pages import empty, page, texts  # noqa: F401 (a fixture)
from tests.app.test_foreign_runs_drawn import hf_state, llama_factory, llmc
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import SAMPLES, Server

SEED = "seed-cliff"
LLMC = "llmc-gpt2-124m-lr6e-4-warmup700-batch512-seed1337"  # wider than Vega's 160 px label
QUIET = "quiet-run"
QUIET_FOR_S = 88.0  # issue 20, item 4: "60.0 lines/min after 88 s of silence"
GRID = "[data-testid=stDataFrame]"
WIDTH = 1400  # issue 20, item 7: "the Runs page's last column is cut off at 1,400 px"
STALL_WHEN = "no new line for 10× the run's typical interval"


def quiet_run(folder: Path, lines: int = 400) -> None:
    """A line a second (elapsed_s), the file last written QUIET_FOR_S seconds ago."""
    folder.mkdir(parents=True)
    log = folder / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 2.0 - s / 1000, "elapsed_s": float(s)})
                           + "\n" for s in range(1, lines + 1)))
    then = time.time() - QUIET_FOR_S
    os.utime(log, (then, then))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logs = tmp_path_factory.mktemp("tables") / "logs"
    shutil.copytree(SAMPLES / SEED, logs / SEED)
    llmc(logs / LLMC, nan_at=30)
    hf_state(logs / "hf-sft")
    llama_factory(logs / "hf-sft")  # trainer_state.json is read, this one repeats it
    (logs / "prose").mkdir()
    (logs / "prose" / "notes.txt").write_text("Notes on the sweep.\nLunch at noon.\n")
    (logs / "piped").mkdir()
    os.mkfifo(logs / "piped" / "metrics.jsonl")
    quiet_run(logs / QUIET)
    server = Server(logs)
    try:
        wait_for_incidents(server)
        yield server
    finally:
        server.stop()


def wait_for_incidents(server: Server, timeout: float = 60) -> None:
    """Until live diagnosis has the seed's five incidents and the llm.c run's NaN."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = server.sql("SELECT run, count(*) FROM incidents GROUP BY run")
        counts = dict(map(tuple, found.json().get("rows", []))) if found.status_code == 200 \
            else {}
        if counts.get(SEED, 0) >= 5 and counts.get(LLMC):
            return
        time.sleep(0.3)
    raise AssertionError(f"incidents not detected within {timeout} s: {counts}")


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def tab(browser, shots, request):
    tab = browser.new_page(viewport={"width": WIDTH, "height": 1600})
    yield tab
    tab.screenshot(path=str(shots / f"{request.node.name}.png"), full_page=True)
    tab.close()


def grid_rows(tab, index: int = 0) -> list[list[str]]:
    """The cells of the page's ``index``-th table, header first, as the grid's hidden
    accessible table holds them."""
    grid = tab.locator(GRID).nth(index)
    grid.locator("table tr").nth(1).wait_for(state="attached", timeout=30_000)
    return grid.evaluate("""g => [...g.querySelectorAll('table tr')].map(
        r => [...r.querySelectorAll('th, td')].map(c => c.innerText.trim()))""")


def alert_texts(tab) -> str:
    return " | ".join(tab.locator("[data-testid=stAlert]").all_inner_texts())


# ---- the Runs page --------------------------------------------------------------------------

def test_the_pace_falls_once_lines_stop_and_ends_at_0(tmp_path):
    """In process, at chosen clocks: the pace over the 300 s ending now. Today's main kept
    60.0 (the pace of the 300 s ending at the newest line) at every one of them."""
    quiet_run(tmp_path / "logs" / QUIET)
    with ingest(tmp_path / "logs") as monitor:
        monitor.tailer.catch_up()
        cursor, tails = monitor.db.cursor(), runs.Tails()
        wrote = monitor.db.cursor().execute("SELECT max(grew_at) FROM files").fetchone()[0]

        def pace(after_s: float) -> float:
            table = runs.page(cursor, runs.Ask(), wrote + after_s, tails=tails).table
            return float(table.set_index("run").loc[QUIET, "lines_per_min"])

        assert pace(1.0) == pytest.approx(60.0)  # a second after the newest line: no news
        # 88 s quiet: the 212 s of log before the silence hold steps 188..400
        assert pace(QUIET_FOR_S) == pytest.approx(60.0 * 212 / (212 + QUIET_FOR_S))
        assert pace(200.0) < pace(QUIET_FOR_S)
        assert pace(300.0) == 0.0 and pace(3600.0) == 0.0


def test_runs_page_pace_falls_after_88_s_of_silence(served, tab):
    tab.goto(served.url)
    header, *rows = grid_rows(tab)
    row = next(r for r in rows if QUIET in r[header.index("run")])
    pace = float(row[header.index("lines/min")])
    assert 0 < pace < 50, row  # today's main: 60.0, a line a second as if it still wrote


def test_runs_table_fits_1400_px_and_names_the_files_not_read(served, tab):
    tab.goto(served.url)
    header, *rows = grid_rows(tab)
    assert header[-1] == "last stored" and {SEED, LLMC, "hf-sft", QUIET} <= {
        r[0].split("run=")[-1] for r in rows}
    scroller = tab.locator(f"{GRID} .dvn-scroller").first
    wide, shown = scroller.evaluate("s => [s.scrollWidth, s.clientWidth]")
    assert wide <= shown, f"the table is {wide} px wide in {shown} px: its last column is cut"
    # neither the prose nor the FIFO is read: each is named with why, never a clean page
    tab.get_by_text("prose/notes.txt").first.wait_for(timeout=30_000)
    notice = alert_texts(tab)
    assert "2 file(s) not read" in notice, notice
    assert re.search(r"prose/notes\.txt: not a log yet: no line with a step-like key", notice)
    assert re.search(r"piped/metrics\.jsonl: .*not a regular file", notice), notice
    # the LLaMA-Factory log that repeats the Trainer's state is listed, but misses nothing
    repeated = tab.get_by_text("Also not read, with nothing missed").inner_text()
    assert "hf-sft/trainer_log.jsonl" in repeated and "hf-sft/trainer_log.jsonl" not in notice


# ---- the Incidents page ---------------------------------------------------------------------

def markdown(tab) -> str:
    return " | ".join(tab.locator("[data-testid=stMarkdown]").all_inner_texts())


def test_incidents_page_writes_the_selected_incident_in_full(served, tab):
    tab.goto(f"{served.url}/incidents?run={SEED}")
    header, *rows = grid_rows(tab)
    assert len(rows) == 5, rows
    # the first incident is written out until one is selected: its whole evidence
    first = rows[0][header.index("evidence")]
    tab.locator("[data-testid=stMarkdown]", has_text=first[:60]).first.wait_for(timeout=30_000)
    assert first in markdown(tab).replace("\n\n", " ").replace("\\", ""), markdown(tab)
    # select the stall at step 2027 (the last row): its causes and evidence, uncut
    grid = tab.locator(GRID).first.bounding_box()
    row_px = 35  # Streamlit's row and header height
    tab.mouse.click(grid["x"] + 14, grid["y"] + row_px * (len(rows) + 0.5))
    stall = rows[-1]
    assert (stall[header.index("kind")], stall[header.index("step")]) == ("stall", "2027")
    evidence = stall[header.index("evidence")]
    assert "blocked the training loop for 155.2 s" in evidence  # the part the grid cut off
    # the page's list already says "stall in gap_s at step 2027": wait for the stall's own cause
    tab.locator("[data-testid=stMarkdown]", has_text="Likely cause: checkpoint").first.wait_for(
        timeout=30_000)
    shown = markdown(tab)
    assert "at step 2027" in shown and "Likely cause: checkpoint" in shown, shown
    assert evidence in shown.replace("\n\n", " "), shown


def test_incidents_page_of_another_trainer_names_the_files_not_read(served, tab):
    tab.goto(f"{served.url}/incidents?run={LLMC}")
    header, *rows = grid_rows(tab)
    assert {r[header.index("kind")] for r in rows} == {"nonfinite"}, rows
    tab.locator("[data-testid=stMarkdown]", has_text="nonfinite in").first.wait_for(
        timeout=30_000)
    # every run's page: the prose and the FIFO were never read, and it says so
    tab.goto(f"{served.url}/incidents")
    tab.get_by_text("prose/notes.txt").first.wait_for(timeout=30_000)
    notice = alert_texts(tab)
    assert "prose/notes.txt" in notice and "piped/metrics.jsonl" in notice, notice


# ---- the Alerts page ------------------------------------------------------------------------

def test_alerts_page_shows_each_rules_when_in_full(served, tab):
    tab.goto(f"{served.url}/alerts")
    cell = tab.locator("[data-testid=stTable] td", has_text=STALL_WHEN).first
    cell.wait_for(timeout=30_000)
    assert "(at least 1m; 10m while a checkpoint is being saved)" in cell.inner_text()
    table = tab.locator("[data-testid=stTable]").first.bounding_box()
    box = cell.bounding_box()
    assert box["x"] + box["width"] <= table["x"] + table["width"] + 1  # wrapped, not cut
    assert box["x"] + box["width"] <= WIDTH
    runs = tab.locator("[data-testid=stTable] td", has_text=re.compile(r"^\*$"))
    assert runs.count() == 3  # each built-in rule's runs "*", as typed (not a bullet)
    # the newest notification's text in full (the grid cuts it), here the stall's
    newest = httpx.get(f"{served.url}/api/alerts", timeout=10).json()["notifications"][0]
    tab.locator("[data-testid=stMarkdown]", has_text=newest["text"][:40]).first.wait_for(
        timeout=30_000)
    assert newest["text"] in markdown(tab).replace("\\", ""), markdown(tab)
    # the States and notifications grids fit too, the llm.c run's long name and all
    scrollers = tab.locator(f"{GRID} .dvn-scroller")
    assert scrollers.count() == 2
    for grid in scrollers.all():
        wide, shown = grid.evaluate("s => [s.scrollWidth, s.clientWidth]")
        assert wide <= shown, f"a table is {wide} px wide in {shown} px: its last column is cut"


def test_an_empty_states_table_says_none(empty):  # noqa: F811
    at = page("views/alerts.py")
    assert not at.exception and not at.error, texts(at.error)
    headers = [h.value for h in at.subheader]
    assert headers[:2] == ["States", "Silences in force"], headers
    assert [c.value for c in at.caption].count("None.") >= 2  # States and Silences alike
    assert all("rule" not in frame.value.columns for frame in at.dataframe)


# ---- the Compare page -----------------------------------------------------------------------

def test_compare_draws_each_run_in_its_own_colour_with_its_full_name(served, tab):
    tab.goto(f"{served.url}/compare?runs={SEED},{LLMC}&metric=loss")
    chart = tab.locator("[data-testid=stVegaLiteChart]").first
    chart.locator(".role-legend-label text").nth(1).wait_for(state="attached", timeout=30_000)
    labels = chart.evaluate("""c => [...c.querySelectorAll('.role-legend-label text')]
        .map(t => t.textContent)""")
    assert labels == sorted([SEED, LLMC]), labels  # not "llmc-gpt2-124m-lr6e-4-war…"
    swatches = chart.evaluate("""c => [...c.querySelectorAll('.role-legend-symbol path')]
        .map(p => p.getAttribute('fill'))""")
    assert swatches == RUN_COLORS[:2], swatches  # Streamlit's theme: two blues
    strokes = chart.evaluate("""c => [...new Set([...c.querySelectorAll('.mark-line path')]
        .map(p => p.getAttribute('stroke')))]""")
    assert sorted(strokes) == sorted(RUN_COLORS[:2]), strokes
    # the legend's rows add to the chart's height, not take the plot's: Streamlit's default
    # height left a plot of 40 px for five runs, 131 for two
    plot = chart.evaluate("""c => Math.max(...[...c.querySelectorAll('.role-axis-grid')]
        .map(g => g.getBBox().height))""")
    assert plot >= 200, plot


# ---- the SQL page ---------------------------------------------------------------------------

def start_from(tab, name: str) -> str:
    """Pick a named query on the SQL page; the value its $run input is pre-filled with."""
    picker = tab.locator("[data-testid=stSelectbox]").filter(has_text="start from a named query")
    picker.click()
    tab.keyboard.type(name)
    tab.keyboard.press("Enter")
    field = tab.get_by_label("$run", exact=True).and_(tab.get_by_test_id("stTextInputField"))
    field.wait_for(timeout=30_000)
    return field.input_value()


def test_sql_page_prefills_the_run_last_looked_at_else_the_newest(served, tab):
    tab.goto(f"{served.url}/sql")
    newest = httpx.get(f"{served.url}/api/runs", timeout=10).json()["runs"][0]["run"]
    assert start_from(tab, "time_gaps") == newest != SEED
    assert newest != QUIET  # live first, then the most recently written: quiet for 88 s
    tab.goto(f"{served.url}/run?run={QUIET}")  # a new session, that looks at the quiet run
    tab.get_by_role("heading", name=QUIET).first.wait_for(timeout=30_000)
    tab.get_by_role("link", name="SQL", exact=True).click()  # the same session
    assert start_from(tab, "time_gaps") == QUIET
    tab.get_by_role("button", name="Run", exact=True).click()
    tab.get_by_text(re.compile(r"^\d+ row\(s\) in")).first.wait_for(timeout=30_000)
    assert not tab.get_by_text(re.compile(r"^0 row\(s\) in")).count()
