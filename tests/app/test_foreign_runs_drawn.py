"""Runs of other trainers on the dashboard, the API and the alert rules (issue 19, part 0):
a Hugging Face ``trainer_state.json``, a LLaMA-Factory ``trainer_log.jsonl``, an llm.c
``main.log``, a TensorBoard event file (written by tensorboardX's real SummaryWriter), a text
log (a torchtitan-style stdout), Lightning's ``metrics.csv`` and JSONL under a name of the
user's choosing, each a small synthetic log this test writes, in its own run folder.

Through the real server and headless Chromium: /api/runs gives each run's lines and last
step, /metrics its step, its Run page draws its charts (with the epoch marker the Trainer's
state implies, and, for a log with no time field, a note that time gaps cannot be shown), and
Compare overlays them all. In process: such runs end (finished when the log marks the end of
training, else idle once it stops growing), and a copied old log pages nobody.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import httpx
import pytest
from tensorboardX import SummaryWriter

from app.alerts.rules import Rule
from app.ingest import settle
from app.read import runs
from tests.app.test_alert_engine import Bench
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import Server

STEPS = 40
CHART = "[data-testid=stVegaLiteChart]"
UNTIMED = "has no time field"


def loss(step: int) -> float:
    return 3.0 - step / STEPS


def hf_state(folder: Path, steps: int = STEPS, *, ended: bool = True, nan_at: int = 0) -> None:
    """The Trainer's state: an entry every step over 2 epochs (an epoch starts at step 21),
    and at the end, if ``ended``, its end-of-training entry (train_runtime)."""
    history = [{"epoch": s / 20, "grad_norm": 1.0, "learning_rate": 1e-4,
                "loss": math.nan if s == nan_at else loss(s), "step": s}
               for s in range(1, steps + 1)]
    if ended:
        history.append({"epoch": 2.0, "step": steps, "total_flos": 1e12, "train_loss": 2.5,
                        "train_runtime": 120.0, "train_samples_per_second": 3.3})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps(
        {"global_step": steps, "max_steps": STEPS, "num_train_epochs": 2,
         "log_history": history}, indent=2))


def llama_factory(folder: Path, steps: int = STEPS, *, ended: bool = True) -> None:
    """LLaMA-Factory's trainer_log.jsonl, with its closing line at total_steps if ``ended``."""
    rows = [{"current_steps": s, "total_steps": STEPS, "loss": loss(s), "accuracy": s / STEPS,
             "epoch": s / STEPS, "percentage": 100 * s / STEPS,
             "elapsed_time": f"0:00:{s:02d}", "remaining_time": "0:00:10"}
            for s in range(1, steps + 1)]
    if ended:
        rows.append({"current_steps": STEPS, "total_steps": STEPS, "epoch": 1.0,
                     "percentage": 100.0, "elapsed_time": "0:00:41", "remaining_time": "0:00:00"})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def llmc(folder: Path, steps: int = STEPS, *, nan_at: int = -1) -> None:
    """llm.c's main.log: training lines, a validation line; no time field at all."""
    lines = [f"s:{s} trl:{'nan' if s == nan_at else f'{loss(s):.4f}'} lr:0.000100 norm:1.0000"
             for s in range(steps)]
    lines.insert(20, "s:20 tel:2.6000")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.log").write_text("\n".join(lines) + "\n")


def tensorboard(folder: Path, *, start: float | None = None, nan_at: int = 0) -> None:
    """A SummaryWriter's scalars, one step a second from ``start`` (Unix seconds; now)."""
    start = time.time() - STEPS if start is None else start
    writer = SummaryWriter(str(folder))
    for s in range(1, STEPS + 1):
        value = math.nan if s == nan_at else loss(s)
        writer.add_scalar("loss", value, s, walltime=start + s)
        writer.add_scalar("accuracy", s / STEPS, s, walltime=start + s)
    writer.close()


def text_log(folder: Path) -> None:
    """A torchtitan-style stdout (``python train.py | tee train.log``): a banner, logging
    prefixes with the clock, ANSI colours, one training line a second ending a second ago."""
    start = time.time() - STEPS - 1
    lines = ["Starting job: tiny text-log run", "\x1b[32mconfig: lr=1e-4 steps=40\x1b[0m"]
    for s in range(1, STEPS + 1):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start + s))
        lines.append(f"[rank0]:[titan] {when},000 - root - INFO - \x1b[31mstep: {s:2d}  "
                     f"\x1b[32mloss: {loss(s):8.5f}  \x1b[33mmemory: 12.3GiB(15.6%)  "
                     f"\x1b[34mtps: 1,234\x1b[39m")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.log").write_text("\n".join(lines) + "\n")


def lightning_csv(folder: Path) -> None:
    """Lightning's CSVLogger: a sparse wide table, a training row per step and a validation
    row (epoch, no loss) after each epoch of 20 steps; no time column."""
    rows = ["epoch,step,loss,val_loss"]
    for s in range(1, STEPS + 1):
        rows.append(f"{(s - 1) // 20},{s},{loss(s):.4f},")
        if s % 20 == 0:
            rows.append(f"{(s - 1) // 20},{s},,{loss(s) + 0.1:.4f}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")


def any_jsonl(folder: Path) -> None:
    """Someone's own loop: JSONL under a name of their choosing, `iteration` and a Unix
    `timestamp` for the step and the clock."""
    start = time.time() - STEPS - 1
    rows = [{"iteration": s, "loss": loss(s), "timestamp": start + s} for s in
            range(1, STEPS + 1)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


# run: (writer, lines stored, last step, whether its log has a time field)
FORMATS = {
    "text-log": (text_log, STEPS, STEPS, True),
    "lightning-csv": (lightning_csv, STEPS, STEPS, False),
    "own-jsonl": (any_jsonl, STEPS, STEPS, True),
    "hf-trainer": (hf_state, STEPS, STEPS, False),
    "llama-factory": (llama_factory, STEPS, STEPS, True),
    "llm.c": (llmc, STEPS, STEPS - 1, False),
    # the file's last step waits until the file has settled (settle.SETTLE_S): so do we
    "tensorboard": (tensorboard, STEPS, STEPS, True),
}


def tensorboard_tags(folder: Path) -> None:
    """As most TensorBoard users log: tags with a section, ``train/loss`` and
    ``train/accuracy``, beside the learning rate."""
    start = time.time() - STEPS
    writer = SummaryWriter(str(folder))
    for s in range(1, STEPS + 1):
        writer.add_scalar("train/loss", loss(s), s, walltime=start + s)
        writer.add_scalar("train/accuracy", s / STEPS, s, walltime=start + s)
        writer.add_scalar("train/lr", 1e-4, s, walltime=start + s)
    writer.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("foreign") / "logs"
    for run, (write, *_) in FORMATS.items():
        write(logdir / run)
    tensorboard_tags(logdir / "tensorboard-tags")
    server = Server(logdir)
    try:
        yield server
    finally:
        server.stop()


def api_runs(server: Server) -> dict[str, dict]:
    answer = httpx.get(server.url + "/api/runs", headers=server.headers, timeout=10)
    return {r["run"]: r for r in answer.json()["runs"]}


def chart(page, title: str):
    return page.locator(CHART).filter(has=page.locator("svg text", has_text=re.compile(
        rf"^{re.escape(title)}$")))


@pytest.mark.parametrize("run", FORMATS)
def test_a_run_of_another_trainer_is_listed_and_drawn(served, browser, run, tmp_path):
    _, lines, last_step, timed = FORMATS[run]
    deadline = time.monotonic() + 30
    while api_runs(served).get(run, {}).get("last_step") != last_step:
        assert time.monotonic() < deadline, api_runs(served).get(run)
        time.sleep(0.2)
    row = api_runs(served)[run]
    assert (row["lines"], row["last_step"], row["attempts"], row["errors"]) == (
        lines, last_step, 1, 0), row
    scraped = httpx.get(served.url + "/metrics", headers=served.headers, timeout=10).text
    assert f'cliffwatch_run_step{{run="{run}"}} {float(last_step)}' in scraped
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    try:
        page.goto(f"{served.url}/run?run={run}")
        loss_chart = chart(page, "loss").first
        loss_chart.wait_for(timeout=30_000)
        chart(page, "gap_steps").first.wait_for(timeout=30_000)
        assert page.get_by_text("has no metric lines yet").count() == 0
        if run == "hf-trainer":  # the epoch the Trainer's fractional epoch crossed
            loss_chart.locator("[aria-label*='epoch']").first.wait_for(state="attached",
                                                                       timeout=10_000)
        if timed:
            chart(page, "gap_s").first.wait_for(timeout=30_000)
        else:
            page.get_by_text(UNTIMED).first.wait_for(timeout=30_000)
        assert page.get_by_text(UNTIMED).count() == (0 if timed else 1)
    finally:
        page.screenshot(path=str(tmp_path / f"{run}.png"), full_page=True)
        page.close()


def test_a_run_whose_loss_is_named_otherwise_draws_it_by_default(served, browser, tmp_path):
    """Issue 20: a TensorBoard run logging ``train/loss`` drew only the gap panels by
    default, while diagnosis and the alert rules watched its loss (the loss_metrics glob
    ``*loss*``): the default panels are what diagnosis watches."""
    page = browser.new_page(viewport={"width": 1400, "height": 2400})
    try:
        page.goto(f"{served.url}/run?run=tensorboard-tags")
        chart(page, "gap_steps").first.wait_for(timeout=30_000)
        chart(page, "train/loss").first.wait_for(timeout=30_000)
        chart(page, "train/accuracy").first.wait_for(timeout=30_000)
        assert chart(page, "train/lr").count() == 0  # not watched, and not a default panel
    finally:
        page.screenshot(path=str(tmp_path / "tensorboard-tags.png"), full_page=True)
        page.close()


def test_the_runs_table_shows_a_loss_named_otherwise_as_its_loss(tmp_path):
    """A TensorBoard run logging ``train/loss`` and ``train/accuracy`` showed "None" under
    loss and accuracy on the Runs page: it shows their newest values, and names them."""
    logs = tmp_path / "logs"
    tensorboard_tags(logs / "tensorboard-tags")
    any_jsonl(logs / "own-jsonl")
    with ingest(logs) as mon:
        table = runs.runs_table(mon.db.cursor()).set_index("run")
    tags, own = table.loc["tensorboard-tags"], table.loc["own-jsonl"]
    # the newest line stored (an event file's last step waits for the file to settle)
    last = int(tags.last_step)
    assert (tags.last_loss, tags.last_accuracy) == (pytest.approx(loss(last)),
                                                    pytest.approx(last / STEPS))
    assert tags.stood_in == "loss: train/loss, accuracy: train/accuracy"
    assert own.last_loss == pytest.approx(loss(STEPS))  # its own loss; no accuracy anywhere
    assert math.isnan(own.last_accuracy) and not isinstance(own.stood_in, str)


def test_the_runs_page_says_which_metric_stood_in(served, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    try:
        page.goto(f"{served.url}/")
        page.get_by_text("Logged under another name, shown as loss or accuracy: "
                         "tensorboard-tags (loss: train/loss, accuracy: train/accuracy).") \
            .wait_for(timeout=30_000)
    finally:
        page.close()


def test_compare_overlays_every_format(served, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    try:
        page.goto(f"{served.url}/compare?runs={','.join(FORMATS)}&metric=loss")
        drawn = chart(page, "loss").first
        drawn.wait_for(timeout=30_000)
        for run in FORMATS:  # each run's line has its entry in the legend
            drawn.locator("svg text", has_text=re.compile(rf"^{re.escape(run)}$")).first \
                .wait_for(state="attached", timeout=10_000)
        assert page.get_by_text("No loss in").count() == 0
    finally:
        page.close()


def test_compare_draws_a_runs_loss_named_otherwise_as_its_loss(served, browser):
    """A TensorBoard run's loss is ``train/loss``: compared on "loss" with a run that logs
    ``loss``, it said "No loss in tensorboard-tags" and drew one run alone."""
    other = next(iter(FORMATS))
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    try:
        page.goto(f"{served.url}/compare?runs={other},tensorboard-tags&metric=loss")
        drawn = chart(page, "loss").first
        drawn.wait_for(timeout=30_000)
        for label in (other, "tensorboard-tags (train/loss)"):
            drawn.locator("svg text", has_text=re.compile(rf"^{re.escape(label)}$")).first \
                .wait_for(state="attached", timeout=10_000)
        page.get_by_text("tensorboard-tags logs no loss: drawn is its train/loss").first \
            .wait_for(timeout=10_000)
        assert page.get_by_text("No loss in").count() == 0
    finally:
        page.close()


def test_runs_of_other_trainers_end_finished_or_idle(tmp_path):
    """A log that marks the end of training is finished; one that stops short of it and has
    not grown for idle_after is idle; neither stays live."""
    logs = tmp_path / "logs"
    hf_state(logs / "hf-done")
    hf_state(logs / "hf-cut", steps=25, ended=False)
    llama_factory(logs / "lf-done")
    llama_factory(logs / "lf-cut", steps=25, ended=False)
    llmc(logs / "llmc")
    with ingest(logs) as mon:
        mon.tailer.catch_up()
        cursor = mon.db.cursor()
        now = time.time()

        def states(at: float) -> dict[str, str]:
            table = runs.page(cursor, runs.Ask(limit=None), at, idle_after=300.0).table
            return dict(zip(table["run"], table["state"], strict=True))

        assert states(now) == {"hf-done": "finished", "lf-done": "finished", "hf-cut": "live",
                               "lf-cut": "live", "llmc": "live"}
        later = states(now + 301)
        assert later == {"hf-done": "finished", "lf-done": "finished", "hf-cut": "idle",
                         "lf-cut": "idle", "llmc": "idle"}
        listed = runs.api_page(cursor, runs.Ask(status="live"), now + 301)
        assert listed["runs"] == [] and listed["total"] == 0  # none is live for ever
        ended = {r["run"]: r["log_ended"] for r in runs.api_page(cursor, runs.Ask())["runs"]}
        assert ended == {"hf-done": True, "lf-done": True, "hf-cut": False, "lf-cut": False,
                         "llmc": False}


STALL = Rule(name="stall", type="stall", severity="critical", stall_factor=10.0, min_s=5.0)
NAN = Rule(name="nan", type="nonfinite", severity="critical")


def test_a_copied_old_log_pages_nobody_and_a_finished_one_never_stalls(tmp_path):
    """Copies have a fresh mtime. History, paging nobody: a TensorBoard log whose own clock
    is two days old, a Trainer's state that marks the end of training, an llm.c log (no
    clock) that holds 500 lines when first seen. The same TensorBoard log written now, and an
    llm.c log of 40 lines (a run just begun), page: their NaN, then their stall."""
    b = Bench(tmp_path, [STALL, NAN])
    try:
        tensorboard(b.logs / "tb-old", start=time.time() - 2 * 86400, nan_at=10)
        hf_state(b.logs / "hf-done", nan_at=10)
        llmc(b.logs / "llmc-old", 500, nan_at=10)
        tensorboard(b.logs / "tb-new", nan_at=10)
        llmc(b.logs / "llmc-new", nan_at=10)
        b.step()
        b.step(time.time() + 1000)
        fired = sorted((n["rule"], n["facts"]["run"]) for n in b.notes()
                       if n["kind"] == "firing")
        assert fired == [("nan", "llmc-new"), ("nan", "tb-new"), ("stall", "llmc-new"),
                         ("stall", "tb-new")]
    finally:
        b.monitor.close()


def old_log(folder: Path, fmt: str, steps: int, *, start: float, nan_at: int) -> Path:
    """A log of ``steps`` steps a second apart from ``start`` by its own clock, a NaN loss at
    step ``nan_at``: TensorBoard's event file, or JSONL with a Unix ``timestamp``."""
    values = [(s, math.nan if s == nan_at else loss(s % STEPS)) for s in range(1, steps + 1)]
    if fmt == "tensorboard":
        writer = SummaryWriter(str(folder))
        for s, value in values:
            writer.add_scalar("loss", value, s, walltime=start + s)
        writer.close()
        (path,) = folder.iterdir()
        return path
    folder.mkdir(parents=True)
    path = folder / "history.jsonl"
    path.write_text("".join(json.dumps({"iteration": s, "loss": v, "timestamp": start + s})
                            + "\n" for s, v in values))
    return path


@pytest.mark.parametrize("fmt", ["tensorboard", "jsonl"])
def test_an_old_log_met_while_still_being_copied_pages_nobody(tmp_path, fmt):
    """An old log the rules met with a tenth of it stored (a copy under way, an event file
    read in parts) was history up to there only: the rest paged its NaN, and a stall once
    the copy ended. Lines that arrive far faster than their own clock ran stay history. A
    live run whose clock is two days off writes at its clock's pace: it still pages."""
    b = Bench(tmp_path, [STALL, NAN])
    try:
        whole = old_log(tmp_path / "made" / "old", fmt, 600, start=time.time() - 2 * 86400,
                        nan_at=500)
        data = whole.read_bytes()
        copy = b.logs / "old" / whole.name
        copy.parent.mkdir(parents=True)
        copy.write_bytes(data[:len(data) // 10])
        b.step()
        assert 0 < b.sql("SELECT count(*) FROM metrics_all WHERE run = 'old'")[0][0] < 100
        with copy.open("ab") as handle:  # the rest of the copy
            handle.write(data[len(data) // 10:])
        b.step()
        time.sleep(settle.SETTLE_S + 0.2)  # an event file's last record, once it settled
        b.step()
        assert b.sql("SELECT max(step) FROM metrics_all WHERE run = 'old'")[0][0] == 600
        b.step(time.time() + 1000)
        assert b.notes() == []
        skewed = time.time() - 2 * 86400
        b.write("skewed", *({"iteration": s, "loss": loss(s), "timestamp": skewed + s}
                            for s in range(1, 31)), file="history.jsonl")
        b.step()
        b.write("skewed", *({"iteration": s, "loss": math.nan if s == 35 else loss(s),
                             "timestamp": skewed + s} for s in range(31, 41)),
                file="history.jsonl")
        b.step(time.time() + 10)  # ten lines in ten seconds, by both clocks
        b.step(time.time() + 1000)
        fired = sorted((n["rule"], n["facts"]["run"]) for n in b.notes()
                       if n["kind"] == "firing")
        assert fired == [("nan", "skewed"), ("stall", "skewed")]
    finally:
        b.monitor.close()


def test_a_stall_of_another_trainer_resolves_when_its_log_marks_the_end(tmp_path):
    b = Bench(tmp_path, [STALL])
    try:
        hf_state(b.logs / "hf", steps=30, ended=False)
        b.step()
        b.step(time.time() + 1000)
        assert [n["kind"] for n in b.notes()] == ["firing"]
        hf_state(b.logs / "hf")  # the Trainer's last save: the rest, and its end entry
        b.step(time.time() + 1000)
        assert [n["kind"] for n in b.notes()] == ["firing", "resolved"]
        assert b.notes()[-1]["facts"]["summary"] == "run ended (completed)"
    finally:
        b.monitor.close()
