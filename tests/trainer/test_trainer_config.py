"""Config: presets, overrides and the user errors the CLI prints without a traceback."""

from __future__ import annotations

import numpy as np
import pytest

from trainer.__main__ import main
from trainer.buckets import epoch_plan
from trainer.config import Config, make_config, parse_args, presets
from trainer.corpus import make_corpus
from trainer.drafter import Drafter
from trainer.errors import TrainerError


def test_presets_exist_and_override_a_few_fields():
    assert {"demo", "fixed", "tiny"} <= set(presets())
    demo, fixed = make_config("demo", out="x"), make_config("fixed", out="x")
    assert (demo.shuffle, demo.ckpt_mode) == ("bucketed", "blocking") and demo.storage_mbps > 0
    assert (fixed.shuffle, fixed.ckpt_mode) == ("mixed", "async")
    assert demo.steps == fixed.steps and demo.corpus_size == fixed.corpus_size


def test_cli_overrides_are_typed():
    config = parse_args(
        ["--out", "runs/x", "--preset=tiny", "--lr=0.01", "--steps", "7",
         "--bucket-bounds=10,20,30,40,50,96", "--shuffle=mixed"]
    )  # fmt: skip
    assert isinstance(config, Config) and config.out == "runs/x"
    assert (config.lr, config.steps, config.shuffle) == (0.01, 7, "mixed")
    assert config.bucket_bounds == [10, 20, 30, 40, 50, 96]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset=demoo"], "unknown preset 'demoo'; choose one of: demo, fixed"),
        (["--stpes=5"], "unknown setting --stpes; did you mean --steps?"),
        (["--steps=five"], "--steps: expected int, got 'five'"),
        (["--steps=1.5"], "--steps: expected int, got '1.5'"),
        (["--shuffle=random"], "expected one of bucketed, mixed"),
        (["--ckpt-mode=lazy"], "expected one of blocking, async"),
        (["--bucket-bounds=1,2,3"], "six ascending lengths"),
        (["--fault=boom@3"], "use nan@STEP, stall@STEP:SECONDS"),
        (["--fault=stall@3"], "use nan@STEP, stall@STEP:SECONDS"),
        (["--attn=flash"], "--attn=flash needs a CUDA GPU and the flash_attn package"),
        (["--resume=latest"], "no checkpoint in"),
        (["stray"], "settings look like --key=value"),
    ],
)
def test_user_mistakes_print_one_clear_line(argv, message, tmp_path, capsys):
    code = main(["--out", str(tmp_path / "run"), "--preset=tiny", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_missing_out_is_a_user_error():
    with pytest.raises(TrainerError, match="pass --out runs/NAME"):
        make_config("tiny")


def test_demo_preset_has_an_epoch_boundary_and_visible_checkpoint_stalls():
    config = make_config("demo", out="x")
    lengths = np.array([len(seq) for seq in make_corpus(config)])
    steps_per_epoch = len(epoch_plan(lengths, config, 0)) // config.grad_accum
    assert steps_per_epoch < config.steps  # at least one epoch boundary
    assert config.ckpt_every < config.steps and config.ckpt_mode == "blocking"
    params = sum(p.numel() for p in Drafter(config).parameters())
    stall_s = 3 * 4 * params / (config.storage_mbps * 1e6)  # weights + two AdamW moments
    assert stall_s > 5 * config.log_every_s  # a gap of several log intervals
