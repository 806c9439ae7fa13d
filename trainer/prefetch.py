"""Asynchronous prefetch: worker threads run the frozen target on upcoming micro-batches.

Workers take micro-batches in stream order, run the target forward, and park the result
(hidden states, soft labels, anchors) in a bounded buffer; the loop takes them back in the
same order. At most `queue_size` batches are in flight or waiting, and `depth()` (the
`hs_queue_depth` metric) is how many are ready. A slow loop sees a full queue; a starving one
sees 0 and a growing `data_wait_s`.

Each batch's randomness (its anchors) is seeded by the batch's (epoch, index), never by a
worker's own generator, and results are handed out in order: so the number of workers and
their timing cannot change what the drafter trains on, which keeps resume exact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from .buckets import Batch
from .config import Config
from .corpus import MASK
from .target import TargetLM, pad_rows


@dataclass
class Prepared:
    batch: Batch
    context: torch.Tensor  # (B, Lc, K*Dt) target hidden states up to the last anchor
    block_tokens: torch.Tensor  # (B, A*S) anchor token then mask tokens, per block
    anchors: torch.Tensor  # (B, A) anchor positions
    target_logits: torch.Tensor  # (B, A, S-1, V) the target's logits at drafted positions
    tokens: int  # real (non-pad) tokens in the batch


def sample_anchors(lengths: list[int], batch: Batch, config: Config) -> torch.Tensor:
    rng = np.random.default_rng([config.run.seed, 55, batch.epoch, batch.index])
    drafter = config.drafter
    rows = [rng.integers(0, n - drafter.block_size + 1, size=drafter.anchors) for n in lengths]
    return torch.from_numpy(np.stack(rows))


@torch.no_grad()
def prepare(
    batch: Batch, corpus: list, target: TargetLM, config: Config, device: torch.device
) -> Prepared:
    """Run the target on one micro-batch and gather what the drafter needs."""
    rows = [corpus[i] for i in batch.rows]
    tokens = pad_rows(rows).to(device)
    anchors = sample_anchors([len(r) for r in rows], batch, config).to(device)
    logits, hiddens = target(tokens)
    context = torch.cat([hiddens[i - 1] for i in config.drafter.hidden_layers], dim=-1)
    context = context[:, : int(anchors.max()) + 1]
    positions = anchors[..., None] + torch.arange(config.drafter.block_size - 1, device=device)
    picked = torch.arange(len(rows), device=device)[:, None, None]
    shape = (len(rows), config.drafter.anchors, config.drafter.block_size)
    blocks = torch.full(shape, MASK, device=device)
    blocks[..., 0] = tokens.gather(1, anchors)
    return Prepared(
        batch=batch,
        context=context,
        block_tokens=blocks.flatten(1),
        anchors=anchors,
        target_logits=logits[picked, positions],
        tokens=sum(len(r) for r in rows),
    )


class Prefetcher:
    """Ordered, bounded, multi-threaded map of `work` over `stream`."""

    def __init__(
        self, stream: Iterator[Batch], work: Callable[[Batch], Prepared], workers: int, size: int
    ) -> None:
        self.stream, self.work, self.size = stream, work, size
        self.cond = threading.Condition()
        self.ready: dict[int, Prepared] = {}
        self.next_task = self.next_out = self.produced = 0
        self.error: BaseException | None = None
        self.stopped = False
        self.threads = [
            threading.Thread(target=self._run, name=f"prefetch-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self.threads:
            thread.start()

    def _take_task(self) -> tuple[int, Batch] | None:
        with self.cond:
            while not self.stopped and self.next_task - self.next_out >= self.size:
                self.cond.wait()
            if self.stopped:
                return None
            self.next_task += 1
            return self.next_task - 1, next(self.stream)

    def _run(self) -> None:
        torch.set_grad_enabled(False)
        while (task := self._take_task()) is not None:
            try:
                item = self.work(task[1])
            except BaseException as exc:  # surfaced to the loop by get()
                with self.cond:
                    self.error = exc
                    self.cond.notify_all()
                return
            with self.cond:
                self.ready[task[0]] = item
                self.produced += 1
                self.cond.notify_all()

    def get(self) -> tuple[Prepared, float]:
        """The next batch in stream order and the seconds spent waiting for it."""
        started = time.monotonic()
        with self.cond:
            while self.next_out not in self.ready:
                if self.error is not None:
                    raise RuntimeError("a prefetch worker failed") from self.error
                self.cond.wait()
            item = self.ready.pop(self.next_out)
            self.next_out += 1
            self.cond.notify_all()
        return item, time.monotonic() - started

    def depth(self) -> int:
        with self.cond:
            return len(self.ready)

    def close(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        for thread in self.threads:
            thread.join()
