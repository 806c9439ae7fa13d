"""Injected faults, for testing monitors: `--fault=nan@120,stall@200:8,lr-spike@300:50`.

- `nan@STEP`: the loss of optimizer step STEP becomes NaN. The trainer's guard then skips that
  update (as a mixed-precision loss scaler would), so the run goes on after one NaN line.
- `stall@STEP:SECONDS`: the loop sleeps SECONDS before step STEP (a hung filesystem or peer).
- `lr-spike@STEP:FACTOR`: step STEP uses FACTOR times the scheduled learning rate.

Each fault also writes a `fault` event (kind, value) so a monitor's test knows the truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TrainerError

PATTERN = re.compile(r"^(nan|stall|lr-spike)@(\d+)(?::([0-9.eE+-]+))?$")
NEEDS_VALUE = {"nan": False, "stall": True, "lr-spike": True}


@dataclass(frozen=True)
class Fault:
    kind: str  # nan, stall or lr-spike
    step: int  # optimizer step it hits
    value: float  # seconds (stall) or factor (lr-spike); 0 for nan


def parse_faults(spec: str) -> dict[int, list[Fault]]:
    """Faults by step, or a TrainerError showing the accepted forms."""
    faults: dict[int, list[Fault]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = PATTERN.match(part)
        if not match or NEEDS_VALUE[match[1]] != (match[3] is not None):
            raise TrainerError(
                f"--fault: cannot read {part!r}; use nan@STEP, stall@STEP:SECONDS "
                "or lr-spike@STEP:FACTOR, comma-separated"
            )
        try:
            value = float(match[3] or 0)
        except ValueError:
            raise TrainerError(f"--fault: {part!r} needs a number after ':'") from None
        fault = Fault(match[1], int(match[2]), value)
        faults.setdefault(fault.step, []).append(fault)
    return faults
