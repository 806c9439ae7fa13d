"""A metric named like one of our derived panels is still charted (issue 22, item 4): a log
that holds its own ``gap_s`` (here the seconds its data loader waited) gets that metric read
and drawn as logged, beside the derived gap between lines, never instead of it or merged
into it. The page itself is checked in tests/app/test_run_page_choices.py."""

from __future__ import annotations

import json
from pathlib import Path

from app.dashboard import panels
from app.diagnose.rules import Watch
from app.read import series as series_mod
from tests.app.test_read_series import open_monitor

OWN = 150.0  # the log's own gap_s: nothing like the 1 s between its lines


def own_gap_log(folder: Path, lines: int = 300) -> None:
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 1.0 / s, "elapsed_s": float(s), "gap_s": OWN}) + "\n"
        for s in range(1, lines + 1)))


def test_a_runs_own_gap_s_is_read_apart_from_the_derived_gap(tmp_path):
    own_gap_log(tmp_path / "logs" / "own")
    monitor = open_monitor(tmp_path / "logs")
    try:
        names = series_mod.metric_names(monitor.db.cursor(), "own")
        assert "gap_s" in names
        frame = series_mod.series(monitor.db.cursor(), "own", ["loss", "gap_s"],
                                  gaps=True).frame
    finally:
        monitor.close()
    values = {m: set(frame.loc[frame["metric"] == m, "value"].dropna()) for m in
              frame["metric"].unique()}
    assert values["gap_s"] == {OWN}  # the log's own numbers, as logged
    assert values["~gap_s"] == {1.0}  # the derived gap between its lines, apart
    assert values["gap_steps"] == {1.0}  # no clash: named as ever


def test_the_derived_panel_is_named_apart_only_for_a_run_with_a_metric_of_its_name():
    assert panels.gap_panels(["loss"]) == {"gap_s": "gap_s", "gap_steps": "gap_steps"}
    assert panels.gap_panels(["loss", "gap_s"]) == {"gap_s (derived)": "gap_s",
                                                    "gap_steps": "gap_steps"}


def test_the_default_panels_keep_both_gaps_for_such_a_run():
    assert panels.default_panels(["gap_s", "loss", "gap_s (derived)", "gap_steps"]) == [
        "loss", "gap_s", "gap_s (derived)", "gap_steps"]
    assert panels.default_panels(["loss", "gap_s", "gap_steps"]) == ["loss", "gap_s", "gap_steps"]


def test_the_watched_metrics_are_found_case_blind_by_diagnosis_and_the_page_alike():
    """One reading of the loss_metrics setting (rules.Watch): a setting written as a
    TensorBoard tag is spelled, ``Train/Loss``, names the run's ``train/loss`` for diagnosis
    and for the Run page's default panels."""
    watch = Watch("Train/Loss", "Val/Acc*")
    assert (watch.kind_of("train/loss"), watch.kind_of("val/accuracy")) == ("spike", "cliff")
    assert panels.default_panels(["lr", "train/loss", "gap_s", "gap_steps"], watch) == [
        "train/loss", "lr", "gap_s", "gap_steps"]


def test_a_run_without_the_compared_metric_stands_in_its_own_of_that_kind():
    """Compare's "loss" of a run that logs ``train/loss`` (TensorBoard) or ``train_loss``
    (Lightning's CSV) is that loss, a training one before a validation one; nothing stands in
    for a metric diagnosis does not watch, or for one whose last word differs."""
    watch = Watch()
    assert watch.stand_in("loss", ["val/loss", "train/loss", "lr"]) == "train/loss"
    assert watch.stand_in("loss", ["val_loss", "train_loss"]) == "train_loss"
    assert watch.stand_in("accuracy", ["eval/accuracy"]) == "eval/accuracy"
    assert watch.stand_in("loss", ["lossy", "train/loss_scale"]) is None
    assert watch.stand_in("lr", ["train/lr"]) is None
