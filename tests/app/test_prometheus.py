"""``GET /metrics`` (issue 12, section 2): a real Prometheus scrapes the real server and its
HTTP API returns the live run's loss as last written; the page parses as Prometheus text,
exports only runs written lately (an ended run for ``metrics_grace``, one without run_end for
``metrics_silence``), at most ``metrics_max_runs``, and only the metrics configured; it never
shows a secret; it passes the same guard as /api (Host, token); and a scrape reads only the
exported runs' newest lines, whatever else is stored."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
from pathlib import Path

import duckdb
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import settings as settings_mod
from app.monitor import Monitor, default_db
from app.read import prometheus
from tests.app.engines import prometheus as start_prometheus
from tests.conftest import Server, wait_for

TOKEN = "tok-prometheus-secret-7c1d"
WEBHOOK = "http://127.0.0.1:9/hooks/webhook-secret-55aa"
HOUR = 3600.0


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def line(step: int, **values) -> str:
    return json.dumps({"step": step, **values}) + "\n"


def write_run(folder: Path, steps: range, *, ended: bool = False, age_s: float = 0.0) -> None:
    """A run of ``steps`` lines (loss, accuracy, tok/s, lr); ``ended``: with run_end;
    ``age_s``: its files last written that long ago."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text(lines(steps))
    if ended:
        (folder / "events.jsonl").write_text(json.dumps(
            {"event": "run_end", "step": steps[-1], "status": "completed"}) + "\n")
    if age_s:
        stamp = time.time() - age_s
        for path in folder.iterdir():
            os.utime(path, (stamp, stamp))


@functools.cache
def lines(steps: range) -> str:
    return "".join(line(s, loss=1 / (s + 1), accuracy=s / 100, **{"tok/s": 900.0 + s}, lr=0.1)
                   for s in steps)


def families(text: str) -> dict[str, list]:
    """{metric family name: its samples}, parsed by prometheus_client's own parser."""
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def runs_of(samples) -> set[str]:
    return {s.labels["run"] for s in samples}


def scrape(server: Server, **headers) -> httpx.Response:
    return httpx.get(server.url + "/metrics", headers={**bearer(), **headers}, timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The real server with a token, a webhook that refuses connections (given up at once)
    and a 3 s grace, over a live run (with one bad line), a run without run_end silent since
    yesterday and one finished last week."""
    logdir = tmp_path_factory.mktemp("served") / "logs"
    write_run(logdir / "live", range(30))
    write_run(logdir / "crashed-yesterday", range(30), age_s=24 * HOUR)
    write_run(logdir / "finished-last-week", range(30), ended=True, age_s=168 * HOUR)
    with (logdir / "live" / "metrics.jsonl").open("a") as handle:
        handle.write("not json\n")
    server = Server(logdir, "--token", TOKEN, "--metrics-grace", "3", "--webhook", WEBHOOK,
                    "--webhook-give-up", "0", headers=bearer())
    yield server, logdir
    server.stop()


# --- a real Prometheus ---------------------------------------------------------------------

SCRAPE_CONFIG = """
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: cliffwatch
    authorization:
      credentials: {token}
    static_configs:
      - targets: ["{target}"]
"""


def test_real_prometheus_scrapes_the_live_runs_newest_loss(served, tmp_path):
    server, logdir = served
    write_run(logdir / "training", range(20))
    stop = threading.Event()

    def write_while_prometheus_starts():  # a live run: lines keep coming
        step = 20
        while not stop.wait(0.2):
            with (logdir / "training" / "metrics.jsonl").open("a") as handle:
                handle.write(line(step, loss=1 / (step + 1)))
            step += 1

    writer = threading.Thread(target=write_while_prometheus_starts)
    writer.start()
    config = SCRAPE_CONFIG.format(token=TOKEN, target=server.url.removeprefix("http://"))
    try:
        with start_prometheus(tmp_path / "prometheus", config) as prom:
            wait_for(lambda: prom.query('cliffwatch_run_metric{run="training",metric="loss"}'),
                     timeout=20)
            stop.set()
            writer.join()
            with (logdir / "training" / "metrics.jsonl").open("a") as handle:
                handle.write(line(5000, loss=0.123456789012345, accuracy=0.75))

            def final_line_seen() -> dict[str, str] | None:
                found = prom.query('cliffwatch_run_metric{run="training"} or '
                                   'cliffwatch_run_step{run="training"}')
                newest = {s["metric"].get("metric", s["metric"]["__name__"]): s["value"][1]
                          for s in found}
                return newest if newest.get("loss") == "0.123456789012345" else None

            seen = wait_for(final_line_seen, timeout=20)  # the value as written, to the digit
            assert seen["accuracy"] == "0.75" and seen["cliffwatch_run_step"] == "5000"
            assert prom.query('up{job="cliffwatch"}')[0]["value"][1] == "1"
    finally:
        stop.set()
        writer.join()


# --- /metrics itself, on the real server ----------------------------------------------------


def test_metrics_page_parses_and_exports_only_recent_runs(served):
    server, logdir = served
    write_run(logdir / "just-finished", range(10), ended=True)  # within the 3 s grace

    def exported() -> dict[str, list]:
        # its lines and its run_end are two files, ingested one after the other
        found = families(scrape(server).text)
        ended = ("just-finished", "completed") in {
            (s.labels["run"], s.labels["status"]) for s in found["cliffwatch_run_info"]}
        return found if ended and "just-finished" in runs_of(found["cliffwatch_run_step"]) \
            else {}

    found = wait_for(exported)
    runs = runs_of(found["cliffwatch_run_step"])  # (others' tests may add runs of their own)
    assert {"live", "just-finished"} <= runs
    assert not runs & {"crashed-yesterday", "finished-last-week"}
    values = {(s.labels["run"], s.labels["metric"]): s.value
              for s in found["cliffwatch_run_metric"]}
    assert values[("live", "loss")] == 1 / 30 and values[("live", "tok/s")] == 929.0
    assert values[("live", "accuracy")] == 0.29 and ("live", "lr") not in values
    info = {(s.labels["run"], s.labels["status"]) for s in found["cliffwatch_run_info"]}
    assert {("live", "running"), ("just-finished", "completed")} <= info
    kinds = {s.labels["kind"] for s in found["cliffwatch_run_open_incidents"]}
    assert {"spike", "cliff", "stall", "nonfinite"} <= kinds
    assert total(found, "cliffwatch_ingest_errors", severity="error") == 1
    assert total(found, "cliffwatch_runs") >= 4
    for name in ("cliffwatch_ingest_lag_seconds", "cliffwatch_outbox_pending",
                 "cliffwatch_files_watched", "cliffwatch_alerts"):
        assert found[name], name
    # past the grace period the finished run drops out; the live one stays
    def dropped() -> bool:
        runs = runs_of(families(scrape(server).text)["cliffwatch_run_step"])
        return "live" in runs and "just-finished" not in runs

    wait_for(dropped, timeout=15)


def total(found: dict[str, list], name: str, **labels) -> float:
    return sum(s.value for s in found[name] if s.name in (name, name + "_total")
               and labels.items() <= s.labels.items())


def test_metrics_page_keeps_secrets_and_passes_the_guard(served):
    server, _ = served
    # a notification to the webhook that refuses it: given up, and counted as such
    sent = httpx.post(server.url + "/api/alerts/test", headers=bearer(), timeout=30)
    assert sent.status_code == 200, sent.text
    page = scrape(server)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    assert total(families(page.text), "cliffwatch_deliveries_failed", status="expired") >= 1
    assert TOKEN not in page.text and "webhook-secret" not in page.text
    assert "127.0.0.1:9" not in page.text
    # the same guard as /api: no token, a wrong one, a foreign Host or Origin
    assert httpx.get(server.url + "/metrics", timeout=10).status_code == 401
    assert scrape(server, Authorization="Bearer wrong").status_code == 401
    assert scrape(server, Host="evil.example").status_code == 403
    assert scrape(server, Origin="http://evil.example").status_code == 403


# --- what one scrape reads, on a real database -------------------------------------------


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A live run found first, 14 finished runs of 10,000 lines (more than one of DuckDB's
    122,880-row row groups), last written days ago, and a live run found last: the live
    runs' lines sit in the first and the last row group. No chart tiles are rolled (a
    scan's worst case). Ingested by the monitor, then opened by plain DuckDB (the monitor
    locks its configuration, profiling included)."""
    logdir = tmp_path_factory.mktemp("fleet") / "logs"
    write_run(logdir / "aaa-live", range(100))
    for i in range(14):
        write_run(logdir / f"archive/run-{i:02d}", range(10_000), ended=True,
                  age_s=(1 + i) * 24 * HOUR)
    write_run(logdir / "zzz-live", range(50))
    settings = settings_mod.resolve()
    monitor = Monitor.open(logdir, settings)
    monitor.tailer.tick(discover=True)
    monitor.close()
    database = duckdb.connect(str(default_db(logdir)), read_only=True)
    yield database, settings
    database.close()


class Profiled:
    """A DuckDB cursor that profiles each statement it runs: rows its scans of metric_rows
    read, per named query (the statement runs twice: once profiled, once for the caller)."""

    def __init__(self, cursor):
        self.cursor, self.scanned = cursor, []

    def execute(self, sql, params=None):
        if "metric_rows" not in sql:  # BEGIN, ROLLBACK and the other tables: not profiled
            return self.cursor.execute(sql, params)
        self.cursor.execute("PRAGMA enable_profiling = 'no_output'")
        self.cursor.execute(sql, params).fetchall()
        profile = json.loads(self.cursor.get_profiling_information(format="json"))
        self.cursor.execute("PRAGMA disable_profiling")
        self.scanned.append(sum(n.get("rows_scanned", 0) for n in walk(profile.get("operator", []))
                                if "metric_rows" in json.dumps(n.get("extra_info", {}))))
        return self.cursor.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self.cursor, name)


def walk(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from walk(node.get("children", []))


def test_a_scrape_reads_only_lines_written_since_the_last_one(fleet):
    database, settings = fleet
    cursor, anchors = Profiled(database.cursor()), prometheus.Anchors()
    first = prometheus.read(cursor, settings, anchors=anchors)
    assert {r.run: r.values["loss"] for r in first.runs} == {"aaa-live": 1 / 100,
                                                            "zzz-live": 1 / 50}
    (total,) = database.execute("SELECT count(*) FROM metric_rows").fetchone()
    assert total == 140_150 and len([n for n in cursor.scanned if n]) == 2
    # the next scrape looks for new lines only past the newest line the first one saw, and
    # reads values again only for runs that grew: nothing was written since, so it reads no
    # line at all (DuckDB skips every row group by its rowid range)
    cursor.scanned.clear()
    again = prometheus.read(cursor, settings, anchors=anchors)
    assert again.runs == first.runs
    assert [n for n in cursor.scanned if n] == [], cursor.scanned


def test_cardinality_settings_bound_runs_and_metrics(fleet):
    database, settings = fleet
    cursor = database.cursor()
    narrow = dataclasses.replace(settings, metrics_max_runs=1, loss_metrics="loss",
                                 accuracy_metrics="", metrics_export="lr")
    (only,) = prometheus.read(cursor, narrow).runs
    assert only.run in ("aaa-live", "zzz-live")
    assert set(only.values) == {"loss", "lr"}
    # a week later: every run is past its window, the finished ones and the silent live ones
    assert prometheus.read(cursor, settings, now=time.time() + 168 * HOUR).runs == []
    # with a window of ten days, the finished runs of the last ten days are back
    wide = dataclasses.replace(settings, metrics_grace=10.5 * 24 * HOUR)
    assert len(prometheus.read(cursor, wide).runs) == 2 + 10
