"""Multi-rank runs (issue 11): rank{N}.jsonl files give per-rank step times (the named query
rank_step_times, app/read/ranks.py) and a rank whose steps stay slower than the others' is a
`straggler` incident, whole-run (`python -m app diagnose`) and live (the incidents table the
alert rules read). Real files, the real tailer, a real DuckDB file; the real trainer's torchrun
mode for the rank files it writes. Timing goals are not tested here."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.alerts.engine import Engine
from app.alerts.rules import Rule, default_rules
from app.cli import main as cli
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from app.read.ranks import step_times
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import ROOT, wait_for

STEP_S = 0.5  # the typical step of the synthetic runs


def rank_lines(steps: int, ranks: int, *, every=(1,), slow=None, seed=0, noise="lognormal",
               wait=None) -> dict[int, list[dict]]:
    """Each rank's lines, as the trainer writes them: step times drawn alike for every rank
    (lognormal with 30% spread and 2% hiccups of 10x, or exponential), each rank's clock their
    running sum, one line every ``every[rank]`` steps (the last for the ranks after).
    ``slow``: (rank, from_step, factor); ``wait``: that rank's data_wait_s from then on."""
    rng = np.random.default_rng(seed)
    out = {}
    for rank in range(ranks):
        if noise == "exponential":
            times = rng.exponential(STEP_S, steps)
        else:
            times = rng.lognormal(np.log(STEP_S), 0.3, steps)
            times[rng.random(steps) < 0.02] *= 10
        waits = np.full(steps, 0.01)
        if slow and rank == slow[0]:
            times[slow[1] - 1:] *= slow[2]
            waits[slow[1] - 1:] = wait if wait is not None else 0.01
        clock = np.cumsum(times)
        gap = every[min(rank, len(every) - 1)]
        out[rank] = [{"step": s, "rank": rank, "step_time_s": round(float(times[s - 1]), 4),
                      "data_wait_s": float(waits[s - 1]),
                      "elapsed_s": round(float(clock[s - 1]), 3)}
                     for s in range(gap, steps + 1, gap)]
    return out


def write_run(folder: Path, lines: dict[int, list[dict]], upto: int | None = None) -> None:
    """Append each rank's lines with steps up to ``upto`` (all) that are not in its file yet."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank, rows in lines.items():
        path = folder / f"rank{rank}.jsonl"
        have = len(path.read_text().splitlines()) if path.exists() else 0
        new = [r for r in rows[have:] if upto is None or r["step"] <= upto]
        with path.open("a") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in new)


def stragglers(logs: Path) -> list:
    with ingest(logs) as mon:
        return [i for i in diagnose(mon.db.cursor(), Watch()) if i.kind == "straggler"]


@pytest.mark.parametrize(("every", "noise"), [
    ((1,), "lognormal"),
    ((1,), "exponential"),  # noise as large as the step itself
    ((1, 10), "lognormal"),  # rank 0 every step, the others every 10th
])
def test_equally_noisy_ranks_are_no_stragglers(tmp_path, every, noise):
    steps = 5000 if max(every) == 1 else 20_000  # 5,000 lines a rank; 20,000 and 2,000
    write_run(tmp_path / "logs" / "ddp", rank_lines(steps, 4, every=every, noise=noise))
    assert stragglers(tmp_path / "logs") == []


@pytest.mark.parametrize("every", [(1,), (1, 10), (10, 10, 1, 10)], ids=["all-every-step",
                         "straggler-logs-every-10th", "straggler-logs-every-step"])
def test_a_slow_rank_is_one_straggler_since_it_slowed(tmp_path, every):
    steps = 5000 if max(every) == 1 else 20_000
    since = steps * 3 // 5  # 3000 of 5000
    write_run(tmp_path / "logs" / "ddp", rank_lines(steps, 4, every=every,
                                                      slow=(2, since, 1.8)))
    (found,) = stragglers(tmp_path / "logs")
    assert (found.metric, found.end_step, found.causes) == ("rank2", steps, ["slow_rank"])
    # about where it slowed: the others' hiccups (10x steps) blur where a rank logging every
    # step left them behind when they log every 10th
    assert abs(found.step - since) <= (25 if every == (1,) else 100)
    assert 1.6 < found.value / found.baseline < 2.0
    sentence = found.evidence[0]
    assert re.fullmatch(r"rank 2 took 0\.\d+ s per step against 0\.\d+ s on the 3 other ranks "
                        r"\(1\.\dx, 0\.\d+ s more per step\) since step \d+\.", sentence)
    assert f"since step {found.step}." in sentence


def test_a_rank_waiting_for_input_is_blamed_on_its_input(tmp_path):
    lines = rank_lines(4000, 3, slow=(1, 2000, 2.0), wait=0.45)
    write_run(tmp_path / "logs" / "ddp", lines)
    (found,) = stragglers(tmp_path / "logs")
    assert (found.metric, found.causes) == ("rank1", ["input_wait", "slow_rank"])
    assert found.evidence[0].startswith("rank 1 waited 0.45 s for input per logged step "
                                        "against 0.01 s on the 2 other ranks")


def test_live_ticks_store_what_the_whole_run_finds(tmp_path):
    """Lines arriving over several ingest ticks (the slow rank's file first, the others
    behind it) give the live worker's incidents table the whole run's straggler, grown to
    its last step; a tick that brings nothing new changes nothing."""
    logs, run = tmp_path / "logs", tmp_path / "logs" / "ddp"
    lines = rank_lines(5000, 4, every=(1, 10), slow=(3, 2500, 1.8))
    run.mkdir(parents=True)
    with ingest(logs) as mon:
        live = LiveDiagnosis(mon.db, Watch())
        for upto in (1000, 2600, 2700, 3200, 4100, 5000):
            write_run(run, {3: lines[3]}, upto)
            mon.tailer.tick(discover=True)
            live.update()
            write_run(run, lines, upto)
            mon.tailer.tick(discover=True)
            live.update()
        assert live.update() == 0
        stored = query(mon, "SELECT kind, metric, step, end_step, value, baseline, causes, "
                            "evidence FROM incidents")
        (whole,) = [i for i in diagnose(mon.db.cursor(), Watch()) if i.kind == "straggler"]
    assert stored == [("straggler", "rank3", whole.step, 5000, whole.value, whole.baseline,
                       whole.causes, whole.evidence)]


def test_alert_rules_take_the_new_kind(tmp_path):
    """The built-in incident rule (spikes, cliffs, stalls) ignores a straggler; a rule that
    lists the kind fires with its cause sentence."""
    logs = tmp_path / "logs"
    write_run(logs / "ddp", rank_lines(4000, 2, slow=(1, 2000, 2.0)))
    straggling = Rule(name="straggler", type="incident", kinds=("straggler",))
    with ingest(logs) as mon:
        assert LiveDiagnosis(mon.db, Watch()).update() == 1
        Engine(mon.db, [*default_rules(), straggling], ["log"]).evaluate(time.time())
        notes = query(mon, "SELECT rule, kind, facts FROM notifications ORDER BY id")
    assert [(rule, kind) for rule, kind, _ in notes] == [("straggler", "firing")]
    facts = json.loads(notes[0][2])
    assert facts["summary"].startswith("straggler in rank1 at step ")
    assert facts["causes"] == ["slow_rank"] and facts["evidence"][0].startswith("rank 1 took ")


def test_cli_reports_the_straggler_and_the_step_times(tmp_path, capsys):
    """`diagnose RUN` and `sql --query rank_step_times --param run=R`, through the CLI's own
    entry point (in this process: two interpreters would cost most of this file's budget)."""
    logs = tmp_path / "logs"
    write_run(logs / "ddp", rank_lines(5000, 4, every=(1, 10), slow=(2, 3000, 1.8)))
    assert cli.main(["diagnose", str(logs / "ddp")]) == 0
    report = capsys.readouterr().out
    assert re.search(r"1\. ddp: STRAGGLER rank2 at step 30\d\d \(through 5000\): 0\.\d+ s per "
                     r"step, 1\.\dx the other ranks' 0\.\d+ s\.\n   Likely cause: slow_rank\.",
                     report), report
    with ingest(logs) as mon:  # and the Run page's reader, on the database sql reads
        times = step_times(mon.db.cursor(), "ddp")
    assert list(times.columns) == ["rank", "attempt", "step", "seconds_per_step", "fastest",
                                   "slowest", "lines", "steps"]
    assert set(times["rank"]) == {0, 1, 2, 3} and len(times) <= 4 * 500
    late = times[times["step"] > 4000].groupby("rank")["seconds_per_step"].median()
    assert all(0.5 < late[rank] < 0.7 for rank in (0, 1, 3)) and late[2] > 0.9, late
    assert cli.main(["sql", "--query", "rank_step_times", "--param", "run=ddp", "--logdir",
                     str(logs), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["rank"], r["step"], r["lines"]) for r in rows] == list(
        zip(times["rank"], times["step"], times["lines"], strict=True))


def test_served_torchrun_run_and_a_straggler(tmp_path, make_server):
    """The bundled trainer under torchrun writes rank files; the real server ingests them and
    answers /api/query/rank_step_times with both ranks' step times (two ranks of one
    synchronous job: no straggler), while its diagnosis worker stores the straggler of a run
    beside it, which /api/incidents then lists."""
    logs = tmp_path / "logs"
    out = logs / "ddp"
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    argv = [torchrun, "--standalone", "--nproc-per-node", "2", "-m", "trainer", "--out",
            str(out), "--preset=tiny", "--steps=20", "--log-every-steps=1",
            "--target-pretrain-steps=1"]  # its target's quality does not matter here
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # never leave workers behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, output[-3000:]
    write_run(logs / "slow", rank_lines(3000, 3, slow=(0, 1500, 2.0)))
    server = make_server(logs)

    def straggler_incidents() -> list[dict]:
        found = httpx.get(server.url + "/api/incidents").json()["incidents"]
        return [i for i in found if i["kind"] == "straggler"]

    (found,) = wait_for(straggler_incidents)
    assert (found["run"], found["metric"], found["causes"]) == ("slow", "rank0", ["slow_rank"])
    assert found["evidence"][0].startswith("rank 0 took ")
    body = httpx.get(server.url + "/api/query/rank_step_times", params={"run": "ddp"}).json()
    rows = [dict(zip(body["columns"], row, strict=True)) for row in body["rows"]]
    assert sorted({r["rank"] for r in rows}) == [0, 1]
    assert [sum(r["steps"] for r in rows if r["rank"] == rank) for rank in (0, 1)] == [19, 19]
    assert all(r["seconds_per_step"] > 0 for r in rows)  # steps 2..20 of each rank
