"""One run's recent lines, as the detector keeps them: the frame its rules read (step, CLOCK,
attempt, line_id, the metrics and their NONFINITE flags), where each line sits in the run, and
each line's interval on its own writer's clock."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..ingest.writers import Writers, intervals
from .rules import BASELINE, BEFORE, CLOCK, NONFINITE, NOT_METRICS, is_grad_norm


class RecentLines:
    """The lines from ``base`` on (the run's line numbers, counted from 0): enough to judge the
    next ones (the detector trims the rest)."""

    def __init__(self):
        self.frame = pd.DataFrame()  # recent lines: step, CLOCK, attempt, metrics
        self.base = 0  # line number of frame's first row
        self.writers = Writers()  # who printed the lines so far (ingest/writers.py) ...
        self.interval = np.empty(0)  # ... and each frame line's seconds since the line before
        # of its writer (an array beside the frame: a column costs a pandas copy a tick)

    @property
    def end(self) -> int:
        """The line number after the newest line."""
        return self.base + len(self.frame)

    def append(self, batch: pd.DataFrame) -> int | None:
        """Add the new lines; returns the line where two writers were first seen, if in
        ``batch``."""
        interval, two = self._writers(batch)
        self.frame = pd.concat([self.frame, batch], ignore_index=True)
        self.interval = np.concatenate([self.interval, interval])
        return two

    def _writers(self, batch: pd.DataFrame) -> tuple[np.ndarray, int | None]:
        """Each new line's interval on its own writer's clock (two processes may print one
        log, each with its own clock: an interval across them is no interval), and the line
        where two writers were first seen, if in this batch."""
        clock = (batch[CLOCK].to_numpy(dtype=float) if CLOCK in batch
                 else np.full(len(batch), np.nan))
        dt, two = intervals(self.writers, batch["step"].to_numpy(), clock)
        start = self.base + len(self.frame)
        return np.asarray(dt, dtype=float), None if two is None else start + two

    def metrics(self) -> list[str]:
        """The frame's metrics, gradient norms last: whether a loss spike holds a line is
        known when a gradient norm's spike there is judged."""
        return sorted((c for c in self.frame.columns
                       if c not in NOT_METRICS and not c.startswith(NONFINITE)), key=is_grad_norm)

    def has_nonfinite(self, metric: str) -> bool:
        return NONFINITE + metric in self.frame.columns

    def values(self, metric: str) -> np.ndarray:
        """The metric's value on each frame line, NaN where not logged."""
        return self.frame[metric].to_numpy(dtype=float, na_value=np.nan)

    def pos(self, line: int) -> int:
        return line - self.base

    def step(self, line: int) -> int:
        return int(self.frame["step"].iat[self.pos(line)])

    def context(self, line: int) -> dict:
        """Where an incident at ``line`` sits: its line id, and the line BEFORE lines earlier,
        where the search for causes starts."""
        ids = self.frame["line_id"]
        earlier = max(self.base, line - BEFORE)
        return {"line_id": int(ids.iat[self.pos(line)]),
                "from_line_id": int(ids.iat[self.pos(earlier)]), "end_line": line}

    def trim(self, undecided: int) -> None:
        """Keep the baseline's lines before the first line not decided yet, and those after."""
        drop = undecided - BASELINE - 2 - self.base
        if drop > 0:
            self.frame = self.frame.iloc[drop:].reset_index(drop=True)
            self.interval = self.interval[drop:]
            self.base += drop
