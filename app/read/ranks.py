"""Per-rank step times of a multi-process run (its rank{N}.jsonl files), for the Run page and
/api (queries/rank_step_times.sql, the same named query ``python -m app sql --query
rank_step_times`` runs)::

    rank  attempt  step  seconds_per_step  fastest  slowest  lines  steps
       0        1    10             0.501    0.412    0.633     10     10
       1        1    10             0.503    0.498    0.508      1     10

Bounded by design: about ``points`` step buckets per rank and attempt, whatever the run's
length. Empty (with these columns) for a run without rank files.
"""

from __future__ import annotations

import pandas as pd

from . import frame

POINTS = 500  # buckets per rank: a chart's width in pixels, about

COLUMNS = ["rank", "attempt", "step", "seconds_per_step", "fastest", "slowest", "lines",
           "steps"]


def step_times(cursor, run: str, points: int = POINTS) -> pd.DataFrame:
    """Seconds per step of each rank of ``run``, in step buckets (by attempt, rank, step)."""
    return frame(cursor, "rank_step_times", {"run": run, "points": points})[COLUMNS]
