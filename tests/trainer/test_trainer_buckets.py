"""Batching: budgets, coverage, determinism, and bucketed vs mixed shuffle."""

from __future__ import annotations

import itertools
import statistics

import numpy as np
import pytest
from trainer_testlib import metrics

from trainer.buckets import bucket_ids, bucket_table, epoch_plan, run_lengths
from trainer.config import make_config
from trainer.corpus import BOS, make_corpus


@pytest.fixture(scope="module")
def setup():
    config = make_config(out="x", corpus_size=3000)
    lengths = np.array([len(seq) for seq in make_corpus(config)])
    return config, lengths


def test_corpus_is_deterministic_long_tailed_and_bounded():
    config = make_config(out="x", corpus_size=500)
    a, b = make_corpus(config), make_corpus(config)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    lengths = np.array([len(seq) for seq in a])
    assert lengths.min() >= config.corpus.min_len and lengths.max() <= config.corpus.max_len
    assert np.mean(lengths) > 1.2 * np.median(lengths)  # a long right tail
    assert all(seq[0] == BOS for seq in a)


def test_batches_fit_budget_and_cover_the_epoch_once(setup):
    config, lengths = setup
    plan = epoch_plan(lengths, config, epoch=0)
    ids = bucket_ids(lengths, config.batch.bucket_bounds)
    for batch in plan:
        rows = list(batch.rows)
        assert len(rows) <= config.batch.max_batch_size
        assert len(rows) * lengths[rows].max() <= config.batch.token_budget
        assert set(ids[rows]) == {batch.bucket}  # every micro-batch from one bucket
    covered = sorted(r for batch in plan for r in batch.rows)
    assert covered == list(range(len(lengths)))
    assert [b.index for b in plan] == list(range(len(plan)))


def test_plans_are_deterministic_and_rebuilt_each_epoch(setup):
    config, lengths = setup
    assert epoch_plan(lengths, config, 0) == epoch_plan(lengths, config, 0)
    assert epoch_plan(lengths, config, 0) != epoch_plan(lengths, config, 1)


def test_bucket_table_matches_bounds(setup):
    config, _ = setup
    table = bucket_table(config)
    assert [b["id"] for b in table] == list(range(6))
    assert [b["max_len"] for b in table] == config.batch.bucket_bounds
    assert all(b["min_len"] == a["max_len"] + 1 for a, b in itertools.pairwise(table))


def test_bucketed_shuffle_has_longer_same_bucket_runs_than_mixed(setup):
    _, lengths = setup
    runs = {}
    for mode in ("bucketed", "mixed"):
        config = make_config(out="x", corpus_size=3000, shuffle=mode)
        order = [b.bucket for e in range(5) for b in epoch_plan(lengths, config, e)]
        runs[mode] = run_lengths(order)
    assert statistics.mean(runs["bucketed"]) > 1.15 * statistics.mean(runs["mixed"])
    assert max(runs["bucketed"]) > max(runs["mixed"])


def test_logged_buckets_show_the_same_in_real_runs(run_tiny):
    logged = {}
    for mode in ("bucketed", "mixed"):
        run = run_tiny(f"shuffle-{mode}", shuffle=mode, steps=60, max_batch_size=16)
        logged[mode] = [b for line in metrics(run) for b in line["buckets"]]
    assert len(logged["bucketed"]) == len(logged["mixed"]) == 120
    assert statistics.mean(run_lengths(logged["bucketed"])) > statistics.mean(
        run_lengths(logged["mixed"])
    )


def test_run_lengths():
    assert run_lengths([5, 5, 2, 5, 0, 0, 0]) == [2, 1, 1, 3]
    assert run_lengths([]) == []
