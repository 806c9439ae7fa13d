"""Diagnosis and the alert rules cost what was ingested, not what is stored (issue 12, section
1): with 2,000 finished runs, a pass after which nothing was ingested runs a few statements that
read no run's lines (nor any table with a row per run), the stall rule's timers still run for
the live run, and an append to one run makes exactly that run be read. Work is counted (calls
into app.db.queries, and the rows each read scanned, from DuckDB's EXPLAIN ANALYZE); the time
per pass with 2,000 and 10,000 runs is measured in bench/fleet_passes.py."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pyarrow as pa
import pytest

from app import settings as settings_mod
from app.alerts.engine import Engine
from app.alerts.rules import Rule
from app.db import queries
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis
from app.monitor import Monitor
from tests.app import fleet_db

RUNS = 2000
IDLE_PASSES = 3
STALL = Rule(name="stall", type="stall", severity="critical", stall_factor=1.0, min_s=10.0)
RULES = [STALL, Rule(name="nonfinite", type="nonfinite", severity="critical"),
         Rule(name="incident", type="incident", kinds=("spike", "cliff", "stall"))]
# what a pass may ask when nothing was ingested: nothing that reads runs, files or lines
IDLE_QUERIES = {"diagnose/changes", "alerts/engine_silences_active", "alerts/engine_changes",
                "alerts/engine_incidents_since"}
IDLE_ROWS = 100  # rows an idle pass may scan (incidents, silences): far below one per run


def write_run(folder: Path, finished: bool, first: int = 0, count: int = 20) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"step": s, "loss": 2.0 / (1 + s), "accuracy": s / 100, "elapsed_s": s * 5.0}
            for s in range(first, first + count)]
    with (folder / "metrics.jsonl").open("a") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    if first == 0:
        events = [{"event": "run_start", "step": 0, "elapsed_s": 0.0}]
        if finished:
            events.append({"event": "run_end", "step": count - 1, "elapsed_s": count * 5.0,
                           "status": "completed"})
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


class Ledger:
    """Calls into app.db.queries by name, with the Arrow tables they returned, and the rows
    DuckDB scanned for the reads among them, by table (each read is run once more under
    EXPLAIN ANALYZE: the database's configuration is locked, so profiling cannot be set)."""

    def __init__(self):
        self.calls: list[tuple[str, pa.Table | None]] = []
        self.scanned: collections.Counter = collections.Counter()

    def install(self, monkeypatch) -> None:
        for name in ("execute", "arrow", "arrow_small"):
            monkeypatch.setattr(queries, name, self._wrap(getattr(queries, name)))

    def _wrap(self, original):
        def counted(cursor, name, params=None, identifiers=None):
            self._scan(cursor, name, params, identifiers)
            extra = () if identifiers is None else (identifiers,)
            result = original(cursor, name, params, *extra)
            self.calls.append((name, result if isinstance(result, pa.Table) else None))
            return result
        return counted

    def _scan(self, cursor, name: str, params, identifiers) -> None:
        query = queries.load(name)
        sql = query.text(identifiers)
        body = [line for line in sql.splitlines() if line and not line.startswith("--")]
        if body[0].split()[0].upper() not in ("SELECT", "WITH") or "nextval" in sql:
            return  # a write: counted by name only
        plan = cursor.execute("EXPLAIN (ANALYZE, FORMAT json) " + sql,
                              query.bind(params or {})).fetchall()[0][1]
        nodes = list(json.loads(plan)["operator"])
        while nodes:
            node = nodes.pop()
            nodes += node.get("children", [])
            if "rows_scanned" in node:
                table = node["extra_info"].get("Table", node["type"]).rpartition(".")[2]
                self.scanned[table] += node["rows_scanned"]

    def start(self) -> None:
        self.calls, self.scanned = [], collections.Counter()

    def names(self) -> collections.Counter:
        return collections.Counter(name for name, _ in self.calls)

    def runs_read(self, *names: str) -> collections.Counter:
        """Lines returned by the queries ``names``, by run."""
        return collections.Counter(run for called, table in self.calls if called in names
                                   for run in table["run"].to_pylist())


class Fleet:
    """2,000 finished runs and one live one, judged once by diagnosis and the rules, with a
    clock that only moves forward (the rules are given the time of each pass)."""

    def __init__(self, logs: Path):
        write_run(logs / "done", finished=True)
        write_run(logs / "live", finished=False)
        self.monitor = Monitor.open(logs, settings_mod.resolve())
        self.monitor.tailer.catch_up()
        fleet_db.copy_run(self.monitor.db.cursor(), "done", RUNS)
        self.live = LiveDiagnosis(self.monitor.db, Watch())
        self.engine = Engine(self.monitor.db, RULES, ["log"])
        self.now = (logs / "live" / "metrics.jsonl").stat().st_mtime + 1
        self.ledger = Ledger()
        self.passes()

    def passes(self, seconds: float = 1.0) -> tuple[int, int]:
        """A pass of diagnosis and one of the rules ``seconds`` after the last."""
        self.now += seconds
        return self.live.update(), self.engine.evaluate(self.now)

    def append(self, run: str, first: int, count: int) -> None:
        folder = self.monitor.logdir / run
        write_run(folder, finished=False, first=first, count=count)
        assert self.monitor.tailer.tick(discover=True) == count
        self.now = max(self.now, (folder / "metrics.jsonl").stat().st_mtime)  # written now
        # ... by this fleet's clock, which earlier passes ran ahead of the wall clock that ingest
        # stamps a file's growth with: a run met that far past its last growth would be a log
        # that stopped before cliffwatch watched it (alerts/stall.before_watch), never a stall
        self.monitor.db.cursor().execute("UPDATE files SET grew_at = $1 WHERE run = $2",
                                         [self.now, run])

    def notes(self, run: str) -> list[str]:
        return [kind for (kind,) in self.monitor.db.cursor().execute(
            "SELECT kind FROM notifications WHERE run = $1 ORDER BY id", [run]).fetchall()]

    def lines_read(self) -> dict[str, collections.Counter]:
        """Metric lines returned to diagnosis and to the rules, by run."""
        return {"diagnosis": self.ledger.runs_read("run_lines", "diagnose/new_lines"),
                "alerts": self.ledger.runs_read("alerts/engine_new_lines")}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    made = Fleet(tmp_path_factory.mktemp("fleet") / "logs")
    yield made
    made.monitor.close()


def test_the_fleet_is_stored_and_judged(fleet):
    cursor = fleet.monitor.db.cursor()
    assert cursor.execute("SELECT count(*), count(DISTINCT run) FROM metrics_all").fetchall() \
        == [((RUNS + 2) * 20, RUNS + 2)]
    assert cursor.execute("SELECT count(*) FROM runs WHERE status = 'completed'").fetchall() \
        == [(RUNS + 1,)]
    assert len(fleet.engine.progress) == RUNS + 2  # the rules met every run


def test_idle_passes_read_no_run_and_the_live_runs_stall_timer_runs(fleet, monkeypatch):
    fleet.ledger.install(monkeypatch)
    for _ in range(IDLE_PASSES):
        fleet.ledger.start()
        assert fleet.passes() == (0, 0)
        names = fleet.ledger.names()
        assert set(names) <= IDLE_QUERIES and sum(names.values()) <= len(IDLE_QUERIES), names
        assert sum(fleet.ledger.scanned.values()) <= IDLE_ROWS, fleet.ledger.scanned
    fleet.ledger.start()
    fleet.passes(30)  # the live run has been silent for over 30 s: its stall fires
    reads = {n for n in fleet.ledger.names() if not n.endswith(("_store", "_ids"))}
    assert reads <= IDLE_QUERIES | {"alerts/engine_typical_intervals",  # its budget
                                    "alerts/engine_open_checkpoints"}
    notes = fleet.monitor.db.cursor().execute("SELECT rule, run FROM notifications").fetchall()
    assert ("stall", "live") in notes and {run for _, run in notes} == {"live"}


@pytest.mark.parametrize("run", ["live", "new"])
def test_an_append_to_one_run_reads_that_run_only(fleet, monkeypatch, run):
    """Lines of the live run, then of a run never seen before (met without a full look)."""
    fleet.ledger.install(monkeypatch)
    first = fleet.monitor.db.cursor().execute(
        "SELECT count(*) FROM metrics_all WHERE run = $1", [run]).fetchall()[0][0]
    fleet.append(run, first, 3)
    fleet.ledger.start()
    fleet.passes()
    assert fleet.lines_read() == {"diagnosis": {run: 3}, "alerts": {run: 3}}
    assert sum(fleet.ledger.names().values()) <= 20, fleet.ledger.names()
    assert run in fleet.engine.progress
    fleet.ledger.start()
    fleet.passes()
    assert fleet.lines_read() == {"diagnosis": {}, "alerts": {}}


def test_a_run_end_takes_a_run_off_the_stall_timers(fleet, monkeypatch):
    from app.alerts.changes import SWEEP_S

    fleet.passes(SWEEP_S)  # a full look now: the passes below look only at what changed
    fleet.append("ending", 0, 20)
    fleet.passes()  # met
    fleet.passes(15)  # silent past its budget (10 s)
    assert fleet.notes("ending") == ["firing"]
    with (fleet.monitor.logdir / "ending" / "events.jsonl").open("a") as handle:
        handle.write(json.dumps({"event": "run_end", "step": 19, "status": "completed"}) + "\n")
    fleet.monitor.tailer.tick()
    fleet.ledger.install(monkeypatch)
    fleet.ledger.start()
    fleet.passes()
    assert "alerts/engine_changed_runs" not in fleet.ledger.names()
    assert fleet.notes("ending") == ["firing", "resolved"]
    fleet.passes(30)
    assert fleet.notes("ending") == ["firing", "resolved"]


def test_a_full_look_comes_round_every_sweep(fleet, monkeypatch):
    """For what no appended row shows (a log's mtime moving without a complete line)."""
    from app.alerts.changes import SWEEP_S

    fleet.ledger.install(monkeypatch)
    fleet.ledger.start()
    fleet.passes(SWEEP_S)
    assert fleet.ledger.names()["alerts/engine_changed_runs"] == 1
    fleet.ledger.start()
    fleet.passes()
    assert set(fleet.ledger.names()) <= IDLE_QUERIES


def test_the_tile_worker_looks_only_at_files_that_got_lines(fleet, monkeypatch):
    """The chart tile worker (every 2 s, and after each ingest tick) once asked every metrics
    file how many lines it had waiting: 2,002 queries a pass, a core's worth at 10,000 runs."""
    from app.read.tiles import TILE_LINES
    from app.tiler import TileWorker

    worker = TileWorker(fleet.monitor.db)  # not started: its passes are run here
    worker._pass()  # the first look: one query for the files with a tile's worth waiting
    fleet.ledger.install(monkeypatch)
    for _ in range(IDLE_PASSES):
        fleet.ledger.start()
        assert worker._pass() == 0
        assert set(fleet.ledger.names()) == {"read/tiles_changed"}, fleet.ledger.names()
        assert sum(fleet.ledger.scanned.values()) <= IDLE_ROWS, fleet.ledger.scanned
    first = fleet.monitor.db.cursor().execute(
        "SELECT count(*) FROM metrics_all WHERE run = 'tiled'").fetchall()[0][0]
    fleet.append("tiled", first, TILE_LINES + 10)
    fleet.ledger.start()
    assert worker._pass() == TILE_LINES
    assert fleet.ledger.names()["read/tiles_pending"] == 1  # that file only
    assert worker._pass() == 0 and not worker.due  # less than a tile left: off the list
