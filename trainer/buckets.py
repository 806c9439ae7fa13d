"""Length buckets, token-budget batches and the two shuffles, plus a resumable sampler.

Sequences fall into six buckets by length (`bucket_bounds`). A micro-batch holds sequences of
one bucket, as many as fit `token_budget` padded tokens and at most `max_batch_size`. Each
epoch rebuilds the batches from a fresh permutation, then orders them:

- `bucketed`: a plain random permutation of the batches. Long buckets produce many small
  batches, so long runs of one bucket happen (the seed's "gradient whiplash").
- `mixed` (the fix): batches of each bucket are spread evenly over the epoch (stratified), so
  consecutive micro-batches come from different buckets.

Everything is a pure function of (seed, epoch), so the sampler's whole state is its position
`(epoch, index)`: resuming at the same position replays the same batches.

    >>> config = make_config("tiny", out="x")
    >>> epoch_plan(np.array([len(s) for s in make_corpus(config)]), config, epoch=0)[0]
    Batch(epoch=0, index=0, bucket=5, rows=(105, 125, 106, 134, 95))
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .config import Config


@dataclass(frozen=True)
class Batch:
    epoch: int  # epoch this micro-batch belongs to
    index: int  # its position in the epoch's plan
    bucket: int  # bucket id of all its sequences
    rows: tuple[int, ...]  # corpus indices


def bucket_table(config: Config) -> list[dict]:
    """Bucket id -> length range, as written to run.json."""
    lows = [config.corpus.min_len, *(b + 1 for b in config.batch.bucket_bounds[:-1])]
    return [
        {"id": i, "min_len": lo, "max_len": hi}
        for i, (lo, hi) in enumerate(zip(lows, config.batch.bucket_bounds, strict=True))
    ]


def bucket_ids(lengths: np.ndarray, bounds: list[int]) -> np.ndarray:
    return np.searchsorted(np.asarray(bounds), lengths, side="left")


def fill_batches(rows: np.ndarray, lengths: np.ndarray, config: Config) -> list[list[int]]:
    """Greedy packing of `rows` (already shuffled) under the token budget and batch size."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for row in rows:
        length = int(lengths[row])
        fits = (len(current) + 1) * max(longest, length) <= config.batch.token_budget
        if current and (not fits or len(current) == config.batch.max_batch_size):
            batches.append(current)
            current, longest = [], 0
        current.append(int(row))
        longest = max(longest, length)
    if current:
        batches.append(current)
    return batches


def stratified_order(buckets: list[int], rng: np.random.Generator) -> np.ndarray:
    """Proportional interleave: each next slot goes to the bucket furthest behind its share.

    A bucket holding a share f of the batches then appears about every 1/f slots, so no bucket
    runs longer than it must (a bucket with over half the batches still repeats, briefly).
    """
    ids = np.asarray(buckets)
    members = {b: list(np.flatnonzero(ids == b)) for b in np.unique(ids).tolist()}
    share = {b: len(rows) / len(ids) for b, rows in members.items()}
    tie = {b: rng.random() for b in members}  # a fresh tie-break order each epoch
    placed = dict.fromkeys(members, 0)
    order = []
    for slot in range(1, len(ids) + 1):
        left = [b for b in members if placed[b] < len(members[b])]
        pick = max(left, key=lambda b: (slot * share[b] - placed[b], tie[b]))
        order.append(members[pick][placed[pick]])
        placed[pick] += 1
    return np.array(order, dtype=np.int64)


def epoch_plan(lengths: np.ndarray, config: Config, epoch: int) -> list[Batch]:
    """The epoch's micro-batches in training order; the same for the same seed and epoch."""
    rng = np.random.default_rng([config.run.seed, 77, epoch])
    ids = bucket_ids(lengths, config.batch.bucket_bounds)
    batches, owners = [], []
    for bucket in range(len(config.batch.bucket_bounds)):
        rows = rng.permutation(np.flatnonzero(ids == bucket))
        for batch in fill_batches(rows, lengths, config):
            batches.append(batch)
            owners.append(bucket)
    if config.batch.shuffle == "bucketed":
        order = rng.permutation(len(batches))
    else:
        order = stratified_order(owners, rng)
    return [
        Batch(epoch, i, owners[j], tuple(batches[j])) for i, j in enumerate(order.tolist())
    ]


def run_lengths(buckets: list[int]) -> list[int]:
    """Lengths of the runs of equal consecutive bucket ids: [5, 5, 2, 5] -> [2, 1, 1]."""
    runs: list[int] = []
    for i, bucket in enumerate(buckets):
        if i and bucket == buckets[i - 1]:
            runs[-1] += 1
        else:
            runs.append(1)
    return runs


class Sampler:
    """Endless stream of micro-batches from position (epoch, index), epoch after epoch."""

    def __init__(self, lengths: np.ndarray, config: Config) -> None:
        self.lengths = lengths
        self.config = config

    def stream(self, epoch: int, index: int) -> Iterator[Batch]:
        while True:
            plan = epoch_plan(self.lengths, self.config, epoch)
            yield from plan[index:]
            epoch, index = epoch + 1, 0
