"""Every real log of ../shared/realdata, end to end as a user runs it: `ingest --once` over one
log directory holding all of them, then `diagnose --json`. Each case states what a person
reading the numbers sees in that log (realdata/README.md) and checks that cliffwatch says the
same: the steps read, the real incidents with their first cause where the log carries it, and
nothing else (issue 19's acceptance). One ingest and one diagnosis serve every case.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field

import duckdb
import pytest

from tests.conftest import SHARED, needs_realdata, run_cli

REALDATA = SHARED / "realdata"
pytestmark = needs_realdata


@dataclass
class Seen:
    """What a person sees in one log."""

    says: str  # the README's line, shortened
    steps: tuple[int, int, int]  # training rows read, first step, last step
    # (kind, metric, step, first cause or None): every incident diagnosis must report
    incidents: list[tuple] = field(default_factory=list)
    resumes: list[tuple[int, int]] = field(default_factory=list)  # (step before, step after)


CASES = {
    "hf-mistral-translator": Seen(
        "866 entries every 10 steps to 8,660 over 4 epochs, a loss drop at each epoch "
        "boundary, an early grad-norm 16.3 against ~10 at the start: clean", (866, 10, 8660)),
    "slm-training-restarts": Seen(
        "restarted from checkpoints: the step goes back 40->20 near the start, 7580->7520 and "
        "7560->7520 near the end (its first line, step 20, is logged twice: no restart); no "
        "incident", (388, 20, 7760),
        resumes=[(40, 20), (7580, 7520), (7560, 7520)]),
    "llmc-gpt2-124m": Seen(
        "19,552 steps of GPT-2 124M; one grad-norm spike, 4.29 against ~0.3, at step 8715",
        (19552, 0, 19551), [("spike", "grad_norm", 8715, None)]),
    "modded-nanogpt-muon": Seen(
        "6,200 steps, train loss 10.92->3.25, val falling every time; the train_time reset at "
        "step 11 is a timer, single-step data jumps: clean", (6200, 1, 6200)),
    "modded-nanogpt-soap": Seen(
        "6,000 steps; every 10th step takes 5x (the SOAP preconditioner): a rhythm, not "
        "stalls; clean", (6000, 1, 6000)),
    "nanogpt-tinystories": Seen(
        "iters 0-6,000 every 10, loss 10.94->1.27; the iter after each eval is slow (eval time "
        "folded in): clean", (601, 0, 6000)),
    "nanogpt-gpt2-wandb": Seen(
        "iters 0-13,280, loss 10.97->3.13, the iter after each eval ~25 s: clean; copied "
        "while it ran", (1329, 0, 13280)),
    "torchtitan-vlm-447m": Seen(
        "a resumed run, steps 6,501-7,500, loss 2.23->1.85, 2 s between lines but for the "
        "checkpoint save at step 7000 that the log says took 17.46 s", (1000, 6501, 7500),
        [("stall", "gap_s", 7001, "checkpoint")]),
    "torchtitan-crash-resume": Seen(
        "right after each in-run save (5500, 6000, 6500) the loss jumps 2.5x until a crash "
        "~150 steps later (exitcode: -6, last steps 5650, 6150, 6650); each retry reloads the "
        "checkpoint (the step goes back) and the loss is normal again; finishes at 7,000",
        (2000, 5001, 7000),
        [("spike", "loss", 5501, "checkpoint"), ("spike", "loss", 6001, "checkpoint"),
         ("spike", "loss", 6501, "checkpoint"), ("stall", "gap_s", 5501, "checkpoint"),
         ("stall", "gap_s", 6001, "checkpoint"), ("stall", "gap_s", 6501, "checkpoint"),
         # each failed launch is a real crash (its torchelastic line), ranked after the above
         ("crash", "run_end", 5650, "crash"), ("crash", "run_end", 6150, "crash"),
         ("crash", "run_end", 6650, "crash")],
        # launch 3 was stopped by hand at 5531 (its last line lands after launch 4's header);
        # launch 5 began again at 5501
        resumes=[(5650, 5501), (5731, 5501), (5531, 5501), (6150, 6001), (6650, 6501)]),
    "megatron-ds-qwen7b": Seen(
        "500 iterations, lm loss 12.64->6.23 with no jump; grad norm 44 against ~20 in "
        "warm-up; iterations after validation slower: clean", (500, 1, 500)),
    "megatron-lm-llama1b-killed": Seen(
        "iterations 1-344 of 500, killed; grad norm 85.8 at iteration 30 against ~2 while the "
        "lr warms up, the loss bumping 7.67->7.91; the first checkpoint save adds ~18 s at "
        "iteration 51", (344, 1, 344),
        [("spike", "grad_norm", 30, "learning_rate"), ("stall", "gap_s", 51, "checkpoint")]),
    "hf-llama32-sft-quoted": Seen(
        "167 training dicts over 3 epochs, loss 3.41->0.58 with a drop at each epoch "
        "boundary; eval loss a little worse in epoch 3: no incident", (167, 1, 167)),
    "hf-chatglm2-lora-nohup": Seen(
        "1,190 dicts over 25 epochs, loss 3.57->0.0023 (memorised); 1.5x blips at ~0.03 are "
        "noise at tiny values: clean", (1190, 1, 1190)),
    "lightning-yolov3-csv": Seen(
        "train_loss every 50 steps (744 values, 49-37,199) 45.9->3.40, a few 1.3x bumps: "
        "clean", (744, 49, 37199)),
}


@pytest.fixture(scope="module")
def read(tmp_path_factory):
    """Every real log ingested once through the CLI, and the diagnosis of all of them."""
    logs = tmp_path_factory.mktemp("realdata") / "logs"
    for name in CASES:
        shutil.copytree(REALDATA / name, logs / name)
    done = run_cli("ingest", "--logdir", str(logs), "--once", timeout=300)
    assert done.returncode == 0, done.stderr
    diagnosed = run_cli("diagnose", str(logs), "--json", timeout=300)
    found = json.loads(diagnosed.stdout)
    incidents = found["incidents"] if isinstance(found, dict) else found
    db = duckdb.connect(str(logs / ".cliffwatch" / "cliffwatch.duckdb"), read_only=True)
    try:
        steps = {run: (n, lo, hi) for run, n, lo, hi in db.execute(
            "SELECT run, count(*), min(step), max(step) FROM metrics GROUP BY run").fetchall()}
        resumes = db.execute("SELECT run, prev_step, start_step FROM attempts "
                             "WHERE prev_step IS NOT NULL ORDER BY run, attempt").fetchall()
    finally:
        db.close()
    return {"incidents": incidents, "steps": steps, "resumes": resumes}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_steps_a_person_sees_are_read(read, name):
    assert read["steps"].get(name) == CASES[name].steps, CASES[name].says


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnosis_says_what_a_person_sees(read, name):
    seen = CASES[name]
    got = [i for i in read["incidents"] if i["run"] == name and i["kind"] != "two_writers"]
    keys = sorted((i["kind"], i["metric"], i["step"]) for i in got)
    assert keys == sorted(k[:3] for k in seen.incidents), f"{seen.says}: {got}"
    by_key = {(i["kind"], i["metric"], i["step"]): i for i in got}
    for kind, metric, step, cause in seen.incidents:
        if cause is not None:
            assert by_key[(kind, metric, step)]["causes"][0] == cause, (
                seen.says, by_key[(kind, metric, step)])


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n].resumes))
def test_the_restarts_a_person_sees_are_resumes_and_nothing_else(read, name):
    got = [(before, after) for run, before, after in read["resumes"] if run == name]
    assert got == CASES[name].resumes, CASES[name].says
