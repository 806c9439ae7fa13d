"""Callbacks that make a trainer's own loop write log format v1 through ``cliffwatch.init``.

- ``cliffwatch.integrations.transformers.CliffwatchCallback``: a Hugging Face
  ``transformers.TrainerCallback``;
- ``cliffwatch.integrations.lightning.CliffwatchCallback``: a ``lightning.pytorch`` Callback.

Each records what the monitor needs to name a cause: the logged metrics, every checkpoint save
(``checkpoint_start`` / ``checkpoint_end`` with the seconds it blocked the loop and its folder),
epoch starts, evaluation passes (``eval_start`` / ``eval_end``), a resume from a checkpoint, and
``run_end`` with the reason, a crash's error included. Neither module imports its library
until it is used: ``import cliffwatch`` stays dependency-free. docs/integrations.md has the
details and the ten-line plain-PyTorch loop.
"""

from __future__ import annotations

import math
import re

# how the monitor's readers tell an evaluation metric (app/ingest/formats/keys.py; the app is
# never imported by the logging room, so the pattern is restated, not shared)
_EVAL_NAME = re.compile(r"(eval|val|valid|validation|test)[_/]", re.IGNORECASE)


def is_eval_name(key: str) -> bool:
    """``eval_loss``, ``val/acc``, ``test_f1``: an evaluation metric's name."""
    return _EVAL_NAME.match(key) is not None


def numbers(values: dict) -> dict:
    """The entries of ``values`` that are metrics: numbers (a tensor's ``.item()`` too), not
    text or lists; a bool is kept as the number it is."""
    kept = {}
    for key, value in values.items():
        if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, complex):
            kept[key] = float(value) if isinstance(value, bool) else value
    return kept


def whole_epoch(epoch: float | None) -> int | None:
    """The epoch a loop starts, or None while it is inside one (a resume mid-epoch starts
    no epoch: its loader skips ahead in the one it was in)."""
    if epoch is None or not math.isfinite(epoch) or epoch != int(epoch):
        return None
    return int(epoch)
