"""A run that never learns and a run that crashed are incidents (issue 19, sweep M2/R5 and
M3/R14): a loss bit-identical over 10 lines in a row (with 3 significant digits or more) is
``frozen``, and the first cause of the non-finite incident that left it so; a run_end with
status failed (our own events.jsonl, or torchelastic's "failed (exitcode: N)" line in a text
log) is a ``crash`` quoting the step reached, the planned total and the last error. Whole-run
and live diagnosis agree; both reach ``diagnose``, /api/incidents and the default alert rules.
Fixtures: tests/data/frozen/ (its README.txt says what each holds)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx
import pytest
import streamlit as st

from app import state
from app.alerts.fields import KINDS
from app.alerts.rules import default_rules
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import KIND_RANK, LiveDiagnosis, diagnose, severity
from app.diagnose.frozen import significant_digits
from tests.app.test_alert_engine import bench  # noqa: F401 (a fixture)
from tests.app.test_dashboard_pages import page, serve_in_process
from tests.app.test_diagnose import diagnose_json
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata, run_cli, wait_for

FROZEN = Path(__file__).resolve().parents[1] / "data" / "frozen"
STUCK = ("titan-inf", "megatron-nan")  # the loss never moves
MOVING = ("quantised", "nine")  # repeats, but of a rounded value, or one line short
CRASHED = ("titan-crashed", "own-failed")
NO_UPDATE = "no update is applied"


def copied(tmp_path: Path, *names: str) -> Path:
    logs = tmp_path / "logs"
    for name in names:
        shutil.copytree(FROZEN / name, logs / name)
    return logs


@pytest.mark.parametrize(("value", "digits"), [
    (11.76178, 7), (10.40111, 7), (0.0001, 1), (2.0, 1), (1.5e-05, 2), (0.125, 3), (-3.25, 3)])
def test_significant_digits_of_a_logged_value(value, digits):
    assert significant_digits(value) == digits


def test_a_loss_that_never_changes_is_frozen_and_the_nans_cause(tmp_path):
    """torchtitan with grad_norm inf: 11.76178 on all 25 lines; Megatron with a NaN grad norm
    at iteration 1: 1.040111E+01 on all 13 lines that log a loss. Neither a loss printed as
    0.0001 (1 digit) nor 9 equal lines in a learning run is frozen."""
    found = diagnose_json(copied(tmp_path, *STUCK, *MOVING))
    assert sorted((i["run"], i["kind"], i["metric"], i["step"], i["end_step"], i["value"],
                   i["severity"]) for i in found) == [
        ("megatron-nan", "frozen", "loss", 3, 15, 10.40111, "critical"),
        ("megatron-nan", "nonfinite", "grad_norm", 1, 1, "NaN", "critical"),
        ("titan-inf", "frozen", "loss", 1, 240, 11.76178, "critical"),
        ("titan-inf", "nonfinite", "grad_norm", 1, 240, "Infinity", "critical")]
    titan = {i["kind"]: i for i in found if i["run"] == "titan-inf"}
    assert titan["frozen"]["causes"] == ["no_update"]
    assert titan["frozen"]["evidence"][0].startswith(
        f"loss unchanged at 11.76178 over 25 lines in a row (steps 1-240): {NO_UPDATE}")
    assert titan["frozen"]["evidence"][0].endswith("(inferred: the values of its lines)")
    for run in STUCK:  # the NaN is explained: it left the loss frozen, not "unknown"
        nonfinite = next(i for i in found if (i["run"], i["kind"]) == (run, "nonfinite"))
        assert nonfinite["causes"] == ["no_update"] and NO_UPDATE in nonfinite["evidence"][0]
    done = run_cli("diagnose", str(tmp_path / "logs"))
    assert done.returncode == 0, done.stderr
    assert ("titan-inf: FROZEN loss at step 1 (through 240): 11.76178 on every line, bit for "
            "bit: the run is not learning.") in done.stdout
    assert "No incidents in runs nine, quantised:" in done.stdout


def test_a_run_whose_log_says_it_failed_is_a_crash(tmp_path):
    """torchtitan stopped at step 300 by a connection error (torchelastic's failed line, exit
    code 1); our own trainer's run_end failed at step 40 of run.json's max_steps 1000, with
    its error."""
    found = diagnose_json(copied(tmp_path, *CRASHED))
    assert sorted((i["run"], i["kind"], i["metric"], i["step"], i["baseline"], i["causes"],
                   i["severity"]) for i in found) == [
        ("own-failed", "crash", "run_end", 40, 1000.0, ["crash"], "critical"),
        ("titan-crashed", "crash", "run_end", 300, None, ["crash"], "critical")]
    said = {i["run"]: i["evidence"][0] for i in found}
    assert said["own-failed"].startswith(
        "the run failed at step 40 of 1000; last error: 'CUDA out of memory. Tried to allocate "
        "2.00 GiB'; ")
    assert said["own-failed"].endswith("(logged: events.jsonl)")
    assert said["titan-crashed"].startswith("the run failed at step 300 (exitcode 1); ")
    assert "(logged: log line 'failed (exitcode: 1) local_rank: 0 (pid: 93742)" in (
        said["titan-crashed"])
    done = run_cli("diagnose", str(tmp_path / "logs"))
    assert "own-failed: CRASH: the run failed at step 40 of 1000." in done.stdout
    assert "titan-crashed: CRASH: the run failed at step 300." in done.stdout


def test_a_crash_ranks_after_the_spikes_and_stalls_that_led_to_it():
    """A relaunched run that failed three times (torchtitan-crash-resume): each crash is a line,
    after the checkpoint spikes and stalls, before a gradient norm's warning."""
    def row(kind, metric="loss", value=None, baseline=None, step=1):
        return {"kind": kind, "metric": metric, "value": value, "baseline": baseline,
                "run": "r", "step": step}
    crash, frozen = row("crash", "run_end", step=5650), row("frozen", value=11.76)
    spike, stall = row("spike", value=1.7, baseline=0.74), row("stall", "gap_s", 60, 2)
    warning = row("spike", "grad_norm", 4.0, 0.1)
    nonfinite = row("nonfinite", "grad_norm", "NaN")
    ordered = sorted([warning, crash, stall, spike, frozen, nonfinite], key=severity)
    assert ordered == [nonfinite, frozen, spike, stall, crash, warning]
    assert {"frozen", "crash"} <= set(KIND_RANK)  # the Incidents page's kinds


@pytest.mark.parametrize("split", [0.3, 0.6])
def test_live_diagnosis_stores_what_the_whole_run_gives(tmp_path, split):
    """Each log ingested in two parts, diagnosed live after each: the stored incidents, causes
    and evidence are the whole run's (the frozen loss grows, the NaN's cause arrives with it,
    the crash comes with the second part)."""
    names = (*STUCK, *MOVING, *CRASHED)
    full = copied(tmp_path / "full", *names)
    logs = tmp_path / "logs"
    parts = {}
    for path in sorted(p for p in full.rglob("*") if p.is_file()):
        text = path.read_text().splitlines(True)
        cut = int(len(text) * split)
        parts[path.relative_to(full)] = text[cut:]
        (logs / path.relative_to(full)).parent.mkdir(parents=True, exist_ok=True)
        (logs / path.relative_to(full)).write_text("".join(text[:cut]))
    with ingest(logs) as mon:
        live = LiveDiagnosis(mon.db, Watch())
        live.update()
        for relative, rest in parts.items():
            with (logs / relative).open("a") as handle:
                handle.write("".join(rest))
        mon.tailer.tick(discover=True)
        live.update()
        stored = sorted(query(mon, "SELECT run, kind, metric, step, end_step, causes, evidence "
                                   "FROM incidents"))
        whole = sorted((i.run, i.kind, i.metric, i.step, i.end_step, i.causes, i.evidence)
                       for i in diagnose(mon.db.cursor(), Watch()))
    assert stored == whole
    assert {(row[0], row[1]) for row in whole} == {
        ("titan-inf", "frozen"), ("titan-inf", "nonfinite"), ("megatron-nan", "frozen"),
        ("megatron-nan", "nonfinite"), ("titan-crashed", "crash"), ("own-failed", "crash")}


def test_the_server_reports_them_as_the_lines_arrive(tmp_path, make_server):
    """Through the real server: /api/incidents has the frozen loss, grown over the lines
    written while it watched, and the crash written last."""
    logs = tmp_path / "logs"
    lines = {name: (FROZEN / name / "train.log").read_text().splitlines(True)
             for name in ("titan-inf", "titan-crashed")}
    for name, text in lines.items():
        (logs / name).mkdir(parents=True)
        (logs / name / "train.log").write_text("".join(text[:14]))
    server = make_server(logs)

    def found() -> dict:
        answer = httpx.get(server.url + "/api/incidents", timeout=30).json()["incidents"]
        return {(i["run"], i["kind"]): i for i in answer}

    wait_for(lambda: ("titan-inf", "frozen") in found(), timeout=60)
    for name, text in lines.items():
        with (logs / name / "train.log").open("a") as handle:
            handle.write("".join(text[14:]))
    got = wait_for(lambda: (lambda f: f if ("titan-crashed", "crash") in f and f[
        ("titan-inf", "frozen")]["end_step"] == 240 else None)(found()), timeout=60)
    assert got[("titan-crashed", "crash")]["step"] == 300
    assert got[("titan-inf", "nonfinite")]["causes"] == ["no_update"]


def test_the_default_incident_rule_pages_for_a_frozen_loss_and_a_crash(bench):  # noqa: F811
    """A live run (its lines' times are now: an old log copied in pages nobody) whose loss
    sits at 3.14159 from step 1, and our own trainer's crash."""
    (rule,) = [r for r in default_rules() if r.type == "incident"]
    b = bench([rule])
    now = time.time()
    b.write("stuck", *({"step": s, "loss": 3.14159, "elapsed_s": 2.0 * s,
                        "time": now - 60 + 2.0 * s} for s in range(1, 13)))
    shutil.copytree(FROZEN / "own-failed", b.logs / "own-failed")
    for path in (b.logs / "own-failed").iterdir():  # copied now, as a live run's files are
        os.utime(path)
    b.monitor.tailer.catch_up()
    LiveDiagnosis(b.monitor.db, Watch()).update()
    b.step(time.time())
    fired = {(n["facts"]["incident"], n["facts"]["step"]): n["facts"]
             for n in b.notes() if n["kind"] == "firing"}
    assert sorted(fired) == [("crash", 40), ("frozen", 1)]
    assert fired[("crash", 40)]["evidence"][0].startswith("the run failed at step 40 of 1000")
    assert fired[("frozen", 1)]["causes"] == ["no_update"]
    # a crash is no crash "in run_end": its message names it as a stall's does
    assert fired[("crash", 40)]["summary"] == "crash at step 40; likely cause: crash"
    assert fired[("frozen", 1)]["summary"].startswith("frozen in loss at step 1 (through 12)")


@needs_realdata
def test_the_crash_resume_runs_crashes_follow_its_checkpoint_spikes(tmp_path):
    """torchtitan-crash-resume (../shared/realdata): three launches crashed (5650, 6150, 6650)
    after the checkpoint spikes, then one completed at 7000: each crash is a line, after the
    spikes and stalls that led to it, and the completed end is none."""
    name = "torchtitan-crash-resume"
    shutil.copytree(SHARED / "realdata" / name, tmp_path / "logs" / name)
    found = [(i["kind"], i["step"]) for i in diagnose_json(tmp_path / "logs")
             if i["kind"] != "two_writers"]
    kinds = [kind for kind, _ in found]
    assert kinds == sorted(kinds, key=lambda k: k == "crash") and kinds.count("spike") == 3
    assert [step for kind, step in found if kind == "crash"] == [5650, 6150, 6650]


def test_the_incidents_page_lists_and_explains_them(tmp_path):
    """The Incidents page, filtered on the new kinds (kind=frozen,crash), lists both, and the
    selected one is written out with its evidence; the chart link opens the run."""
    monitor = serve_in_process(copied(tmp_path, "titan-inf", "own-failed"))
    try:
        at = page("views/incidents.py", kind="frozen,crash")
        assert not at.error, [e.value for e in at.error]
        table = at.dataframe[0].value
        assert sorted(zip(table["run"], table["kind"], strict=True)) == [
            ("own-failed", "crash"), ("titan-inf", "frozen")]
        assert all(link.startswith("./run?run=") for link in table["open"])
        shown = " ".join(str(m.value) for m in at.markdown)
        assert ("the run failed at step 40 of 1000" in shown
                or "11.76178 over 25 lines in a row" in shown), shown
    finally:
        state.set_current(None)
        st.cache_data.clear()
        monitor.close()


def test_a_rules_file_and_metrics_know_the_new_kinds():
    """Every kind diagnosis reports but the two-writers finding can be named in a rules file
    (`kinds = ["crash"]` was refused as unknown) and is counted on /metrics."""
    assert set(KIND_RANK) - {"two_writers"} == set(KINDS)
