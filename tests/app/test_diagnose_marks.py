"""Diagnosis's marks in the database (issue 23): a restarted server does not judge its finished
runs again (their incidents and stored state stay as they were, and the marks say how far it
judged), a run that grew while it was down is judged from where it stopped, with the incidents
and causes a full judge finds, and a stored state that names a class it may not is refused,
never run, and every run judged from the start."""

from __future__ import annotations

import os
import pickle
import shutil
import zlib
from pathlib import Path

import duckdb
import httpx

from app import settings as settings_mod
from app.diagnose import diagnosis as diagnosis_mod
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from app.diagnose.worker import DiagnosisWorker
from app.monitor import Monitor
from tests.app.test_straggler import rank_lines, write_run
from tests.conftest import SAMPLES, wait_for

INCIDENTS = ("SELECT run, kind, metric, step, end_step, worst_step, value, baseline, causes, "
             "evidence FROM incidents ORDER BY ALL")


def cut_seed(logs: Path) -> bytes:
    """The seed copied under ``logs`` (as it is now: the live run's files) with the last third
    of its metric lines left out, before its accuracy cliff; returns those lines."""
    run = Path(shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff",
                               copy_function=shutil.copy))
    lines = (run / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    cut = len(lines) * 2 // 3
    (run / "metrics.jsonl").write_bytes(b"".join(lines[:cut]))
    return b"".join(lines[cut:])


def database(logs: Path) -> Path:
    return logs / ".cliffwatch" / "cliffwatch.duckdb"


def read(logs: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(database(logs)), read_only=True) as con:
        return con.execute(sql).fetchall()


def incidents(server) -> list[dict]:
    return httpx.get(server.url + "/api/incidents", timeout=30).json()["incidents"]


def test_a_restarted_server_judges_only_the_run_that_grew(tmp_path, make_server):
    logs = tmp_path / "logs"
    rest = cut_seed(logs)
    shutil.copytree(SAMPLES / "seed-cliff-plain", logs / "plain", copy_function=shutil.copy)
    server = make_server(logs)
    wait_for(lambda: {i["run"] for i in incidents(server)} == {"seed-cliff", "plain"}, 60)
    server.stop()  # SIGTERM: the worker stores its marks as it stops
    (line, event, _), = read(logs, "SELECT last_line, last_event, last_rank_line "
                                   "FROM diagnosis_marks")
    assert line == read(logs, "SELECT max(line_id) FROM metrics_all")[0][0] and event >= 0
    kept = read(logs, "SELECT run, state FROM diagnosis_state ORDER BY run")
    assert [run for run, _ in kept] == ["plain", "seed-cliff"]
    plain = read(logs, "SELECT step, updated_at FROM incidents WHERE run = 'plain' "
                       "ORDER BY step")
    assert plain  # the plain seed has its stalls, spikes and cliff

    with (logs / "seed-cliff" / "metrics.jsonl").open("ab") as handle:
        handle.write(rest)  # the run grew while no server watched it
    server = make_server(logs)
    wait_for(lambda: any(i["run"] == "seed-cliff" and i["kind"] == "cliff"
                         for i in incidents(server)), 60)
    server.stop()
    # the finished run was not judged again: its incidents not stored again, its state as it was
    assert read(logs, "SELECT step, updated_at FROM incidents WHERE run = 'plain' "
                      "ORDER BY step") == plain
    assert read(logs, "SELECT state FROM diagnosis_state WHERE run = 'plain'") == [kept[0][1:]]
    assert read(logs, "SELECT last_line FROM diagnosis_marks")[0][0] > line
    # ... and the one that grew has what judging it whole finds
    with Monitor.open(logs, settings_mod.resolve()) as monitor:
        whole = diagnose(monitor.db.cursor(), Watch(), ["seed-cliff", "plain"])
        stored = monitor.db.cursor().execute(INCIDENTS).fetchall()
    assert stored == sorted((i.run, i.kind, i.metric, i.step, i.end_step, i.worst_step,
                             i.value, i.baseline, i.causes, i.evidence) for i in whole)


def judged(logs: Path, resume: bool) -> tuple[LiveDiagnosis, list[tuple]]:
    """Ingest what ``logs`` holds and judge it with live diagnosis; its marks are stored."""
    with Monitor.open(logs, settings_mod.resolve()) as monitor:
        monitor.tailer.catch_up()
        live = LiveDiagnosis(monitor.db, Watch(), resume=resume)
        live.update()
        live.save(force=True)
        return live, monitor.db.cursor().execute(INCIDENTS).fetchall()


def test_a_run_judged_from_its_marks_has_what_a_full_judge_finds(tmp_path):
    """Resumed in the middle of the seed's second spike's history, before its cliff: the
    stored detector carries the baseline, the spike's yardstick and the windows."""
    part, full = tmp_path / "part" / "logs", tmp_path / "full" / "logs"
    rest = cut_seed(part)
    shutil.copytree(SAMPLES / "seed-cliff", full / "seed-cliff")
    judged(part, resume=False)
    with (part / "seed-cliff" / "metrics.jsonl").open("ab") as handle:
        handle.write(rest)
    live, resumed = judged(part, resume=True)
    assert list(live.runs) == ["seed-cliff"] and live.runs["seed-cliff"].found
    assert resumed == judged(full, resume=False)[1]
    assert {(kind, step) for _, kind, _, step, *_ in resumed} >= {("cliff", 4231)}


def test_a_slow_rank_judged_from_its_marks_has_what_a_full_judge_finds(tmp_path):
    """The rank lines' detector is kept too: rank 0 turns slow before the restart and stays
    slow after it."""
    lines = rank_lines(3000, 3, slow=(0, 1500, 2.0))
    part, full = tmp_path / "part" / "logs", tmp_path / "full" / "logs"
    write_run(part / "slow", lines, upto=2000)
    write_run(full / "slow", lines)
    judged(part, resume=False)
    write_run(part / "slow", lines)  # the rest, while no server watched
    live, resumed = judged(part, resume=True)
    assert list(live.stragglers) == ["slow"] and not live.runs
    assert resumed == judged(full, resume=False)[1]
    assert [(kind, metric) for _, kind, metric, *_ in resumed] == [("straggler", "rank0")]


class Gadget:
    """What a hostile database could hold: a pickle that runs a call when it is read."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (str(self.path),)


def test_a_stored_state_naming_another_class_is_refused_and_every_run_judged_again(tmp_path,
                                                                                 caplog):
    logs = tmp_path / "logs"
    rest = cut_seed(logs)
    _, before = judged(logs, resume=False)
    ran = tmp_path / "it-ran"
    blob = zlib.compress(pickle.dumps({"lines": Gadget(ran), "ranks": None}))
    with duckdb.connect(str(database(logs))) as con:
        con.execute("UPDATE diagnosis_state SET state = ? WHERE run = 'seed-cliff'", [blob])
    with (logs / "seed-cliff" / "metrics.jsonl").open("ab") as handle:
        handle.write(rest)
    with Monitor.open(logs, settings_mod.resolve()) as monitor:
        monitor.tailer.catch_up()
        worker = DiagnosisWorker(monitor.db, settings_mod.resolve())
        worker.start()
        try:
            cliff = "SELECT count(*) FROM incidents WHERE kind = 'cliff'"
            wait_for(lambda: monitor.db.cursor().execute(cliff).fetchall()[0][0], 60)
        finally:
            worker.stop()
        after = monitor.db.cursor().execute(INCIDENTS).fetchall()
        state = monitor.db.cursor().execute(
            "SELECT state FROM diagnosis_state WHERE run = 'seed-cliff'").fetchall()[0][0]
    assert not ran.exists()  # refused, never run
    assert "judging every run from the start" in caplog.text
    assert b"Gadget" not in zlib.decompress(state)  # stored anew, judged from the start
    assert {row[:4] for row in before} <= {row[:4] for row in after}


def test_a_first_pass_stopped_between_steps_resumes_to_what_a_full_judge_finds(tmp_path,
                                                                               monkeypatch):
    """A server stopped during its first judge of a long history ends the pass between two
    steps of MAX_LINES line ids (the worker's stop, d9abac2), stores its marks, and the next
    start judges on from there to the incidents a whole judge finds."""
    monkeypatch.setattr(diagnosis_mod, "MAX_LINES", 1000)  # the seed's 2,230 lines: 3 steps
    part, full = tmp_path / "part" / "logs", tmp_path / "full" / "logs"
    for logs in (part, full):
        shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
    with Monitor.open(part, settings_mod.resolve()) as monitor:
        monitor.tailer.catch_up()
        live = LiveDiagnosis(monitor.db, Watch())
        live.stopping = lambda: True  # asked to stop before the pass began
        live.update()
        assert live.last_line == 999  # one step judged, not the whole history
        live.save(force=True)
    assert read(part, "SELECT last_line FROM diagnosis_marks")[0][0] == 999
    _, resumed = judged(part, resume=True)
    assert resumed == judged(full, resume=False)[1]
    assert {(kind, step) for _, kind, _, step, *_ in resumed} >= {("cliff", 4231)}
