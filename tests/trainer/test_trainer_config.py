"""Config: presets, overrides and the user errors the CLI prints without a traceback."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from trainer.__main__ import main
from trainer.buckets import epoch_plan
from trainer.config import FIELDS, SECTIONS, Config, make_config, parse_args, presets
from trainer.corpus import make_corpus
from trainer.drafter import Drafter
from trainer.errors import TrainerError


def test_presets_exist_and_override_a_few_fields():
    assert {"demo", "fixed", "tiny"} <= set(presets())
    demo, fixed = make_config("demo", out="x"), make_config("fixed", out="x")
    assert (demo.batch.shuffle, demo.checkpoint.ckpt_mode) == ("bucketed", "blocking")
    assert demo.checkpoint.storage_mbps > 0
    assert (fixed.batch.shuffle, fixed.checkpoint.ckpt_mode) == ("mixed", "async")
    assert (demo.run.steps, demo.corpus) == (fixed.run.steps, fixed.corpus)


def test_cli_overrides_are_typed():
    config = parse_args(
        ["--out", "runs/x", "--preset=tiny", "--lr=0.01", "--steps", "7",
         "--bucket-bounds=10,20,30,40,50,96", "--shuffle=mixed"]
    )  # fmt: skip
    assert isinstance(config, Config) and config.run.out == "runs/x"
    assert (config.optimizer.lr, config.run.steps, config.batch.shuffle) == (0.01, 7, "mixed")
    assert config.batch.bucket_bounds == [10, 20, 30, 40, 50, 96]


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
    steps_per_epoch = len(epoch_plan(lengths, config, 0)) // config.batch.grad_accum
    assert steps_per_epoch < config.run.steps  # at least one epoch boundary
    ckpt = config.checkpoint
    assert ckpt.ckpt_every < config.run.steps and ckpt.ckpt_mode == "blocking"
    params = sum(p.numel() for p in Drafter(config).parameters())
    stall_s = 3 * 4 * params / (ckpt.storage_mbps * 1e6)  # weights + two AdamW moments
    assert stall_s > 5 * config.logging.log_every_s  # a gap of several log intervals


def test_setting_names_are_unique_across_sections_and_each_has_a_meaning():
    names = [f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)]
    assert len(names) == len(set(names)) == len(FIELDS)  # one flat flag per setting
    assert all(FIELDS[name].metadata.get("help", "").strip() for name in names)


def test_help_lists_every_setting_with_its_default_and_meaning(capsys):
    assert main(["--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())  # undo the wrapping
    for name, field in FIELDS.items():
        assert f"--{name.replace('_', '-')}=" in shown, name
        assert " ".join(field.metadata["help"].split()) in shown, name
    assert "(one of bucketed, mixed)" in shown and "--bucket-bounds=24,32,40,48,64,256" in shown


def test_docs_point_to_help_instead_of_a_copied_table():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "trainer.md").read_text()
    assert "python -m trainer --help" in docs
    copied = [name for name in FIELDS if f"| `{name}` | `" in docs]  # a name, then a default
    assert not copied, f"docs/trainer.md repeats settings --help already explains: {copied}"
