"""A resume explains only what was logged after it (app/diagnose/causes.py, ``_resume``): a
resume event names the attempt it opens, never lines logged before it at the same steps. In
../shared/realdata/torchtitan-crash-resume each in-run save (5500, 6000, 6500) is followed by a
spike that lasts until a crash ~150 steps later; the retry that comes after in the file
resumes from that save, at the spike's steps, but came after it. A real resume just before a
spike or stall still names `resume`, in a text log and in our own format, and a resume event
that names no checkpoint step is worded by what it does say. Each case holds for whole-run
and live diagnosis alike.
"""

from __future__ import annotations

import json
import shutil

import pytest

from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis, diagnose
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata, run_cli

CRASH = "torchtitan-crash-resume"
IN_RUN = [(kind, step) for kind in ("spike", "stall") for step in (5501, 6001, 6501)]


def titan(step: int, loss: float, second: int) -> str:
    """A torchtitan training line, its logging prefix included."""
    minute, sec = divmod(second, 60)
    return (f"[rank0]:[titan] 2026-05-11 06:{minute:02d}:{sec:02d},000 - root - INFO - "
            f"step: {step}  loss:  {loss:.4f}  grad_norm:  0.0700  tps: 1,815\n")


def launch(first: int, last: int, spike: int, start_second: int) -> list[str]:
    """Training lines from ``first`` to ``last``, 4 s apart, the loss 2.5x at ``spike`` and the
    two steps after it."""
    return [titan(step, 0.7 * (2.5 if spike <= step < spike + 3 else 1.0),
                  start_second + 4 * (step - first)) for step in range(first, last + 1)]


def relaunched(load: bool) -> str:
    """Launch 1 trains steps 1-80 (a spike at 60) and crashes; the wrapper relaunches it,
    which loads the checkpoint of step 58 (``load``: else it logs no load line) and trains
    59-120, with a spike at 62, three lines after the resume."""
    lines = launch(1, 80, 60, 0)
    lines.append("[Mon May 11 06:10:00 AM UTC 2026] ATTEMPT #2 seed=44 RESUME from /ckpt/run\n")
    if load:
        lines += ["[rank0]:[titan] 2026-05-11 06:10:05,000 - root - INFO - Loading the "
                  "checkpoint from /ckpt/run/checkpoint/step-58.\n",
                  "[rank0]:[titan] 2026-05-11 06:10:09,000 - root - INFO - Training starts "
                  "at step 59\n"]
    return "".join(lines + launch(59, 120, 62, 620))


def by_step(found) -> dict[tuple[str, int], object]:
    return {(i.kind, i.step): i for i in found if i.metric in ("loss", "gap_s")}


def diagnosed(logs) -> dict[tuple[str, int], object]:
    """Whole-run diagnosis of ``logs``' loss and interval incidents, once live diagnosis of
    the same lines has been checked to give the same causes and evidence."""
    with ingest(logs) as mon:
        found = by_step(diagnose(mon.db.cursor(), Watch()))
        LiveDiagnosis(mon.db, Watch()).update()
        rows = query(mon, "SELECT kind, step, causes, evidence FROM incidents")
    live = {(kind, step): (list(c), list(e)) for kind, step, c, e in rows}
    for key, incident in found.items():
        assert live[key] == (incident.causes, incident.evidence), key
    return found


# --- the real log ---------------------------------------------------------------------------

@needs_realdata
def test_the_crashing_runs_in_run_spikes_and_stalls_name_no_resume(tmp_path):
    """Whole-run diagnosis, through the CLI: the resume events at 5500, 6000 and 6500 are
    the later launches', written after the crash that ended each spike."""
    shutil.copytree(SHARED / "realdata" / CRASH, tmp_path / "logs" / CRASH)
    done = run_cli("ingest", "--logdir", str(tmp_path / "logs"), "--once", timeout=300)
    assert done.returncode == 0, done.stderr
    done = run_cli("diagnose", str(tmp_path / "logs"), "--json", timeout=300)
    found = {(i["kind"], i["step"]): i for i in json.loads(done.stdout)}
    for key in IN_RUN:
        assert found[key]["causes"][0] == "checkpoint", found[key]
        assert "resume" not in found[key]["causes"], found[key]


@needs_realdata
def test_live_diagnosis_of_the_crashing_run_names_no_resume_either(tmp_path):
    """Live: the log arrives in four parts, so a later launch's resume event is stored after
    the spike it must not explain (and judges the incidents at its steps again)."""
    data = (SHARED / "realdata" / CRASH / "run_stage2_continuation.log").read_bytes()
    cuts = [data.index(b"\n", len(data) * k // 4) + 1 for k in (1, 2, 3)] + [len(data)]
    log = tmp_path / "logs" / CRASH / "run_stage2_continuation.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"")
    with ingest(tmp_path / "logs") as mon:
        live, start = LiveDiagnosis(mon.db, Watch()), 0
        for cut in cuts:
            with log.open("ab") as handle:
                handle.write(data[start:cut])
            start = cut
            mon.tailer.tick(discover=True)
            live.update()
        rows = query(mon, "SELECT kind, step, causes FROM incidents WHERE run = "
                          f"'{CRASH}' AND kind IN ('spike', 'stall')")
    causes = {(kind, step): list(c) for kind, step, c in rows}
    for key in IN_RUN:
        assert causes[key][0] == "checkpoint", (key, causes)
        assert "resume" not in causes[key], (key, causes)


# --- synthetic logs -------------------------------------------------------------------------

def test_a_relaunch_that_resumes_then_spikes_names_the_resume_and_only_there(tmp_path):
    """The relaunch resumes from step 58 and spikes at 62: resume, quoting its lines. Launch
    1's spike at 60 came before that resume, though the resume's step (58) lies in the
    spike's window."""
    run = tmp_path / "logs" / "titan"
    run.mkdir(parents=True)
    text = relaunched(load=True)
    load = text.index("[rank0]:[titan] 2026-05-11 06:10:05")  # the load line's byte
    (run / "train.log").write_text(text)
    found = diagnosed(tmp_path / "logs")
    after, before = found[("spike", 62)], found[("spike", 60)]
    assert "resume" not in before.causes, before
    assert after.causes[0] == "resume", after
    assert after.evidence[0] == (
        "attempt 2 resumed at step 59 after the previous attempt reached step 80 (the step "
        "went back, and a resume event from the checkpoint of step 58), 3 lines before step "
        f"62. (logged: log line 'ATTEMPT #2 seed=44 RESUME from /ckpt/run' (byte "
        f"{text.index('[Mon May')}); log line 'Loading the checkpoint from /ckpt/run/"
        f"checkpoint/step-58.' (byte {load}) and 1 more)"), after.evidence


def test_a_resume_event_that_names_no_checkpoint_says_what_it_does_say(tmp_path):
    """The wrapper's ATTEMPT line with no load after it: its step is the last one logged
    before it (80), which is no checkpoint's."""
    run = tmp_path / "logs" / "titan"
    run.mkdir(parents=True)
    text = relaunched(load=False)
    (run / "train.log").write_text(text)
    spike = diagnosed(tmp_path / "logs")[("spike", 62)]
    assert spike.causes[0] == "resume", spike
    sentence = spike.evidence[0]
    assert "a resume event at step 80 (after the line of step 80; it names no checkpoint " \
           "step)" in sentence, sentence
    assert "checkpoint of step 80" not in sentence
    assert sentence.endswith("(logged: log line 'ATTEMPT #2 seed=44 RESUME from /ckpt/run' "
                             f"(byte {text.index('[Mon May')}))"), sentence


def own_format(run, stall: bool) -> None:
    """Our trainer's log: steps 1-200, 10 s apart; it resumes from its checkpoint of step 150
    (the checkpoint's line logged again, a resume event in events.jsonl), then a spike three
    lines later, or (``stall``) 300 s before the line after the resume."""
    lines, t = [], 0.0
    for step in [*range(1, 201), *range(150, 260)]:
        resumed = len(lines) >= 200
        t += 300.0 if stall and resumed and step == 151 else 10.0
        spike = resumed and not stall and step == 153
        lines.append({"step": step, "loss": 2.0 * (3 if spike else 1), "time": 1.7e9 + t})
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "events.jsonl").write_text(json.dumps(
        {"event": "resume", "step": 150, "elapsed_s": 1500.0, "from_step": 150,
         "checkpoint": "runs/own/ckpt/step-150"}) + "\n")


@pytest.mark.parametrize(("stall", "key"), [(False, ("spike", 153)), (True, ("stall", 151))])
def test_our_own_resume_event_names_a_spike_or_stall_just_after_it(tmp_path, stall, key):
    own_format(tmp_path / "logs" / "own", stall)
    incident = diagnosed(tmp_path / "logs")[key]
    assert incident.causes[0] == "resume", incident
    assert "a resume event from the checkpoint of step 150" in incident.evidence[0]
    assert incident.evidence[0].endswith("(logged: events.jsonl)"), incident.evidence


def test_a_logged_save_is_quoted_before_the_weights_file_that_repeats_it(tmp_path):
    """Our own trainer logs each save in events.jsonl (with the seconds it blocked) and writes
    ckpt/step-N.pt, which cliffwatch also reads as an inferred save: the stall after it must
    quote the logged save, as the demo's did ("blocked the training loop for 11.3 s"), not
    "began (inferred: file step-300.pt …)" as it did once both were stored."""
    run = tmp_path / "logs" / "own"
    (run / "ckpt").mkdir(parents=True)
    lines = [{"step": s, "loss": 1.0, "elapsed_s": s + (11.0 if s > 30 else 0.0)}
             for s in range(1, 61)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    events = [{"event": "run_start", "step": 0, "elapsed_s": 0.0},
              {"event": "checkpoint_start", "step": 30, "elapsed_s": 30.1,
               "path": "ckpt/step-30.pt"},
              {"event": "checkpoint_end", "step": 30, "elapsed_s": 41.0, "duration_s": 10.9,
               "blocked_s": 10.9, "bytes": 1024, "path": "ckpt/step-30.pt"}]
    (run / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in events))
    (run / "ckpt" / "step-30.pt").write_bytes(b"weights")
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        inferred = query(mon, "SELECT count(*) FROM events WHERE kind = 'checkpoint_end' "
                         "AND CAST(data->>'inferred' AS BOOLEAN)")[0][0]
        stalls = [i for i in diagnose(mon.db.cursor(), Watch()) if i.kind == "stall"]
    assert inferred == 1  # the weights file is read as a save too: the case at hand
    assert [(s.step, s.causes[0]) for s in stalls] == [(31, "checkpoint")]
    assert "blocked the training loop for 10.9 s" in stalls[0].evidence[0]
    assert "(logged: events.jsonl)" in stalls[0].evidence[0], stalls[0].evidence
