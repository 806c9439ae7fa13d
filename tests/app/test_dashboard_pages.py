"""Every dashboard page through Streamlit's AppTest, in-process, against a real database:
the seed run ingested by the real Monitor into tmp_path, and an empty log directory.

The pages read ``app.state.current()``, so each fixture sets a ServerState (with an ingest
worker that is never started: nothing changes under the test) and clears the page caches,
which outlive one AppTest in this process.
"""

from __future__ import annotations

import json
import shutil

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app import state
from app.dashboard import reads
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis
from app.ingest.worker import IngestWorker
from app.monitor import Monitor
from app.settings import Settings
from tests.conftest import ROOT, SAMPLES

MAIN = ROOT / "app" / "dashboard" / "main.py"
SEED = "seed-cliff"
SEED_LINES = 2230  # samples/seed-cliff/metrics.jsonl
# the Run page's default panels for the seed: loss, accuracy, hs_queue_depth, tok_per_sec,
# lr, gap_s, gap_steps, plus the bucket strip under the loss chart
RUN_CHARTS = 8


def serve_in_process(logs, settings=None):
    settings = settings or Settings()
    monitor = Monitor.open(logs, settings)
    monitor.tailer.tick(discover=True)
    while monitor.tailer.behind:
        monitor.tailer.tick(discover=False)
    LiveDiagnosis(monitor.db, Watch(settings.loss_metrics, settings.accuracy_metrics)).update()
    state.set_current(state.ServerState(monitor, IngestWorker(monitor.tailer, settings),
                                        settings))
    st.cache_data.clear()
    return monitor


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    logs = tmp_path_factory.mktemp("seeded") / "logs"
    shutil.copytree(SAMPLES / SEED, logs / SEED)
    monitor = serve_in_process(logs)
    yield monitor
    state.set_current(None)
    monitor.close()


@pytest.fixture
def seed(seeded):
    state.set_current(state.ServerState(seeded, IngestWorker(seeded.tailer, Settings()),
                                        Settings()))
    st.cache_data.clear()
    yield seeded
    st.cache_data.clear()


@pytest.fixture
def empty(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    monitor = serve_in_process(logs)
    yield monitor
    state.set_current(None)
    st.cache_data.clear()
    monitor.close()


def page(path: str | None = None, **params) -> AppTest:
    """The app as a browser opening /PAGE?params (main.py first: navigation registers pages)."""
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    at.query_params.update(params)
    at.run()
    if path:
        at.switch_page(path)
        at.query_params.update(params)
        at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def texts(elements) -> str:
    return " | ".join(str(e.value) for e in elements)


PAGES = ["views/runs.py", "views/run.py", "views/compare.py", "views/incidents.py",
         "views/alerts.py", "views/sql.py"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_runs_on_an_empty_database(empty, path):
    at = page(path)
    assert not at.error, texts(at.error)


def test_runs_page_says_where_logs_go_while_there_are_none(empty):
    at = page()
    shown = texts(at.info)
    assert "Waiting for logs in" in shown and "metrics.jsonl" in shown and "step" in shown


def test_runs_page_lists_the_seed_with_a_link_to_its_run_page(seed):
    at = page()
    assert not at.error
    table = at.dataframe[0].value
    assert table["run"].tolist() == [SEED]
    assert table["open"].tolist() == [f"./run?run={SEED}"]
    assert int(table["last_step"].iloc[0]) > 4000


def test_run_page_draws_every_default_panel_and_the_strip(seed):
    at = page("views/run.py", run=SEED)
    assert not at.error and not at.warning, texts(at.error) + texts(at.warning)
    assert len(charts(at)) == RUN_CHARTS
    assert f"{SEED_LINES} lines" in texts(at.caption)
    assert at.multiselect(key="c-metrics").value == [
        "loss", "accuracy", "hs_queue_depth", "tok_per_sec", "lr", "gap_s", "gap_steps"]
    assert len(at.get("download_button")) == RUN_CHARTS - 1  # a PNG per metric chart


def test_run_page_zoomed_by_its_url_reads_that_range(seed):
    at = page("views/run.py", run=SEED, **{"from": "1900", "to": "2100"}, metrics="loss",
              x="step", smooth="0")
    assert not at.error and not at.warning, texts(at.error) + texts(at.warning)
    assert len(charts(at)) == 2  # loss and its strip
    assert "zoomed on steps 1900–2100" in texts(at.caption)
    assert at.number_input(key="c-from").value == 1900
    assert at.number_input(key="c-to").value == 2100
    at.button[0].click().run()  # Reset zoom
    assert "from" not in at.query_params and "to" not in at.query_params


def test_run_page_controls_write_the_url(seed):
    at = page("views/run.py", run=SEED)
    at.radio(key="c-x").set_value("elapsed").run()
    assert at.query_params["x"] == "elapsed"
    at.multiselect(key="c-metrics").set_value(["accuracy"]).run()
    assert at.query_params["metrics"] == "accuracy"
    assert not at.exception
    assert len(charts(at)) == 1


def test_run_page_explains_bad_parameters(seed):
    at = page("views/run.py", run=SEED, **{"from": "abc", "to": "5"}, x="hours",
              smooth="2", metrics="loss,nope")
    shown = texts(at.warning)
    assert "from must be a whole step number" in shown
    assert "x must be one of step, elapsed, time" in shown
    assert "smooth must be a number from 0" in shown
    assert "no metric nope" in shown
    assert len(charts(at)) >= 1


def test_run_page_names_an_unknown_run_and_how_to_find_runs(seed):
    at = page("views/run.py", run="no-such-run")
    shown = texts(at.error)
    assert "No run named 'no-such-run'" in shown and "Runs page" in shown
    assert not charts(at)


def test_old_alert_link_opens_the_run_page_around_the_step(seed):
    at = page(run=SEED, step="2000")  # /?run=seed-cliff&step=2000, as sent before issue 9
    assert not at.error
    assert at.title[0].value == SEED
    assert "zoomed on steps 1900–2100" in texts(at.caption)
    assert len(charts(at)) == RUN_CHARTS


def test_compare_page_overlays_the_chosen_runs(seed):
    at = page("views/compare.py", runs=SEED)
    assert not at.error
    assert len(charts(at)) == 1
    at = page("views/compare.py", runs=f"{SEED},ghost")
    assert "No run named ghost" in texts(at.warning)


def test_incidents_page_links_each_incident_to_the_zoomed_run_page(seed):
    at = page("views/incidents.py")
    assert not at.error
    table = at.dataframe[0].value
    assert len(table) >= 1
    assert all(link.startswith(f"./run?run={SEED}&from=") and "&to=" in link
               for link in table["open"])


def test_alerts_page_shows_rules_and_explains_a_test_without_delivery(seed):
    at = page("views/alerts.py")
    assert not at.error
    assert any(b.label == "Send test message" for b in at.button)
    next(b for b in at.button if b.label == "Send test message").click().run()
    assert not at.exception
    assert "does not deliver alerts yet" in texts(at.error)


def press_run(at: AppTest) -> AppTest:
    """The SQL page's Run button pressed: a query from the URL runs only then."""
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_sql_page_runs_the_query_in_its_url_once_run_is_pressed(seed):
    at = page("views/sql.py", q="SELECT count(*) FROM metrics")
    assert not at.metric and "Press Run" in texts(at.caption)
    press_run(at)
    assert not at.error, texts(at.error)
    assert at.metric[0].value == str(SEED_LINES)
    assert len(at.get("download_button")) == 1  # CSV


def test_sql_page_shows_errors_as_messages(seed):
    at = press_run(page("views/sql.py", q="SELEC nonsense"))
    assert at.error and not at.exception
    at = press_run(page("views/sql.py", q="DELETE FROM metric_rows"))
    assert at.error and not at.exception


def test_sql_page_starts_from_a_named_query_and_binds_its_parameters(seed):
    at = page("views/sql.py")
    at.selectbox(key="s-named").set_value("time_gaps").run()
    assert not at.exception
    assert at.query_params["query"] == "time_gaps" and "$run" in at.query_params["q"]
    press_run(at)
    assert not at.error, texts(at.error)
    assert charts(at)  # a quick chart of the numeric columns


def test_ingest_failing_or_behind_is_a_warning_on_every_page(seed):
    worker = state.current().worker
    worker.tick_error = "ingest failing: disk full (retrying)"
    at = page("views/run.py", run=SEED)
    assert "ingest failing: disk full" in texts(at.warning)
    worker.tick_error = None
    worker.tailer.last_caught_up -= 600  # ten minutes behind the files on disk
    try:
        at = page()
        assert "behind the log files" in texts(at.warning)
    finally:
        worker.tailer.last_caught_up += 600


@pytest.mark.parametrize("path", [None, "views/run.py", "views/sql.py"])
def test_a_server_starting_or_gone_is_explained_not_a_traceback(seed, path):
    state.set_current(None)
    at = AppTest.from_file(str(MAIN), default_timeout=60).run()
    if path:
        at.switch_page(path).run()
    assert not at.exception
    assert "still starting" in texts(at.info)


def drawn_series(chart) -> dict[str, list]:
    """The series a Run page chart draws (x, value, and the band's hi when it has one), read
    back from the Arrow datasets it was sent."""
    import pyarrow as pa

    for dataset in chart.proto.datasets:
        table = pa.ipc.open_stream(dataset.data.data).read_all()
        if "x" in table.column_names and "value" in table.column_names:
            return table.to_pydict()
    return {}


def test_a_run_longer_than_the_ad_hoc_row_cap_is_charted_to_its_last_line(tmp_path):
    """The page's reads are not ad-hoc SQL: a 15,000-line run used to be charted only to step
    9,999 (the 10,000-row cap of users' queries) while the caption said "every line"."""
    logs = tmp_path / "logs"
    (logs / "long").mkdir(parents=True)
    (logs / "long" / "metrics.jsonl").write_text(
        "".join(f'{{"step": {s}, "loss": {1 + (s == 14_990) * 9}}}\n'
                for s in range(1, 15_001)))
    settings = Settings()
    assert settings.sql_max_rows < 15_000
    monitor = serve_in_process(logs, settings)
    try:
        at = page("views/run.py", run="long", metrics="loss")
        assert "15000 lines, last step 15000" in texts(at.caption)
        drawn = drawn_series(charts(at)[0])
        assert max(drawn["x"]) > 14_900 and len(drawn["x"]) <= 2_000
        assert max(drawn.get("hi") or drawn["value"]) == 10  # the spike at step 14,990
    finally:
        state.set_current(None)
        st.cache_data.clear()
        monitor.close()


def test_run_page_of_a_multi_rank_run_draws_seconds_per_step_by_rank(tmp_path):
    logs = tmp_path / "logs"
    (logs / "ddp").mkdir(parents=True)
    for rank, pace in ((0, 0.5), (1, 0.5), (2, 0.9)):
        (logs / "ddp" / f"rank{rank}.jsonl").write_text("".join(
            json.dumps({"step": s, "elapsed_s": round(s * pace, 3)}) + "\n" for s in range(1, 41)))
    (logs / "ddp" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 1.0 / s}) + "\n" for s in range(1, 41)))
    monitor = serve_in_process(logs)
    try:
        at = page("views/run.py", run="ddp")
        ranked = [c for c in charts(at) if "seconds per step, by rank" in c.proto.spec]
        assert len(ranked) == 1 and not at.error
        times = reads.rank_times("ddp", reads.version("ddp"))
        slow = times.groupby("rank")["seconds_per_step"].median()
        assert list(slow.index) == [0, 1, 2] and slow[2] > 1.5 * slow[0]
    finally:
        state.set_current(None)
        st.cache_data.clear()
        monitor.close()
