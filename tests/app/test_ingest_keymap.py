"""Extra key mappings per run glob (LOGDIR/keys.toml) for keys the default aliases do not
know; a mistake in the file is a message saying where, not a traceback."""

from __future__ import annotations

import json

import pytest

from app.errors import CliffwatchError
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import run_cli

KEYS = """
[[map]]
runs = "lightning/*"
step = "trainer/global_step"
time = "wall"
rename = { "train/loss_step" = "loss" }
"""


def lightning_line(step: int) -> str:
    return json.dumps({"trainer": {"global_step": step, "epoch": 0},
                       "train": {"loss_step": 1.0 / step}, "wall": 1.7e9 + step}) + "\n"


def test_a_mapped_run_reads_its_own_keys_and_others_do_not(tmp_path):
    logs = tmp_path / "logs"
    for run in ("lightning/v3", "other"):
        (logs / run).mkdir(parents=True)
        (logs / run / "train.jsonl").write_text("".join(lightning_line(s) for s in (1, 2, 4)))
    (logs / "keys.toml").write_text(KEYS)
    with ingest(logs) as mon:
        assert query(mon, "SELECT run, step, loss, time, \"trainer/epoch\" FROM metrics_all "
                     "ORDER BY step") == [("lightning/v3", s, 1.0 / s, 1.7e9 + s, 0.0)
                                          for s in (1, 2, 4)]
        assert query(mon, "SELECT severity, reason FROM ingest_errors WHERE file = "
                     "'other/train.jsonl'") == [
            ("info", "not read: not a log: none of its first 3 line(s) is a JSON object with a "
                     "step-like key (step, global_step, current_steps, iter, iteration, it, "
                     "_step)")]


@pytest.mark.parametrize(("text", "words"), [
    ("[[map]]\nruns = 'a/*'\nstepp = 'x'\n", "unknown field(s) stepp"),
    ("[[map]]\nruns = 'a/*'\nrename = { x = 3 }\n", "'rename' must map keys to names"),
    ("[[map]\n", "cannot read the key mappings"),
])
def test_a_mistake_in_the_mappings_says_where(tmp_path, text, words):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "keys.toml").write_text(text)
    with pytest.raises(CliffwatchError, match=r"keys\.toml") as raised:
        ingest(logs)
    assert words in str(raised.value)
    result = run_cli("ingest", "--logdir", str(logs), "--once")
    assert result.returncode != 0 and words in result.stderr
    assert "Traceback" not in result.stderr
