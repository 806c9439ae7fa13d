"""What the loop measures: the window since the last metrics line, the last step, the totals.

These are the only things besides the step number that change inside the training loop. A
window's sums, added up over all ranks, become a metrics line's averages and rates:

    {"loss": 2.31, "accuracy": 0.41, "avg_streak": 1.9, "tgt_batch_per_sec": 3.2, ...}
"""

from __future__ import annotations

import time

from tqdm import tqdm

from . import distributed
from .prefetch import Prepared


class Window:
    """What happened since the previous metrics line (or since the step started)."""

    def __init__(self, produced: int) -> None:
        self.started = time.monotonic()
        self.produced = produced  # prefetcher's count of target batches at the window start
        self.sums = {"loss": 0.0, "accuracy": 0.0, "avg_streak": 0.0}
        self.micro = self.tokens = 0
        self.buckets: list[int] = []

    def add(self, loss: float, stats: dict, prepared: Prepared) -> None:
        self.sums["loss"] += loss
        self.sums["accuracy"] += stats["accuracy"]
        self.sums["avg_streak"] += stats["avg_streak"]
        self.micro += 1
        self.tokens += prepared.tokens
        self.buckets.append(prepared.batch.bucket)


class Meters:
    """The line window, the last step's window and figures, the run's totals, the progress bar."""

    def __init__(self, progress: tqdm) -> None:
        self.progress = progress
        self.window = Window(0)  # since the last metrics line
        self.step_window = Window(0)  # the last optimizer step alone
        self.lr = self.grad_norm = 0.0  # of the last step
        self.step_s = self.wait_s = 0.0  # the last step's time, and its wait for data
        self.log_s = self.blocked_s = 0.0  # totals: writing lines, blocked by saves
        self.tokens = 0

    def start_step(self) -> None:
        self.step_window = Window(0)

    def add(self, loss: float, stats: dict, prepared: Prepared) -> None:
        """One micro-batch's loss and statistics."""
        for window in (self.window, self.step_window):
            window.add(loss, stats, prepared)
        self.tokens += prepared.tokens

    def end_step(self, lr: float, grad_norm: float, step_s: float, wait_s: float) -> None:
        self.lr, self.grad_norm = lr, grad_norm
        self.step_s, self.wait_s = step_s, wait_s

    def line(self, info: distributed.Dist, produced: int) -> tuple[dict, dict]:
        """The window's averages, and its rates, over all ranks (every rank joins the reduce)."""
        window = self.window
        seconds = max(time.monotonic() - window.started, 1e-9)
        sums = distributed.all_sum(
            info, [*window.sums.values(), window.micro, window.tokens, produced - window.produced]
        )
        micro = max(sums[3], 1)
        averages = {key: sums[i] / micro for i, key in enumerate(window.sums)}
        return averages, {
            "tgt_batch_per_sec": round(sums[5] / seconds, 3),
            "dft_batch_per_sec": round(sums[3] / seconds, 3),
            "tok_per_sec": round(sums[4] / seconds, 1),
        }

    def step_line(self, info: distributed.Dist) -> dict:
        """The last step's averages over all ranks (every rank joins the all-reduce)."""
        window = self.step_window
        sums = distributed.all_sum(info, [*window.sums.values(), window.micro])
        return {key: sums[i] / max(sums[-1], 1) for i, key in enumerate(window.sums)}

    def new_window(self, produced: int) -> None:
        self.window = Window(produced)
