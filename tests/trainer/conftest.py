"""Fixtures for the trainer's tests: tiny real runs under one folder.

All runs live under one session folder, so the tiny target is pre-trained once (a couple of
seconds) into its `.target-cache/` and every later run loads it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # for `app.logformat` and `trainer` under plain `pytest`
    sys.path.insert(0, str(ROOT))

from trainer.config import make_config  # noqa: E402
from trainer.train import train  # noqa: E402


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def run_tiny(runs_root):
    """run_tiny(name, **overrides) -> run folder: a real in-process run of the tiny preset."""

    def run(name: str, **overrides: object) -> Path:
        out = runs_root / name
        train(make_config("tiny", out=str(out), **overrides))
        return out

    return run


@pytest.fixture(scope="session")
def long_run(run_tiny) -> Path:
    """One 120-step tiny run shared by the golden, learning and format tests."""
    return run_tiny("long", steps=120, ckpt_every=50, keep=2)
