"""A long seed-format run for tests and benchmarks: metrics.jsonl with the seed's keys
(buckets lists included), one known maximum loss and one 167.2 s stall, written by DuckDB in
about a second a million lines::

    write_run(Path("logs/big/metrics.jsonl"), 1_000_000)
"""

from __future__ import annotations

from pathlib import Path

import duckdb

SPIKE_STEP, STALL_STEP = 654_322, 500_001  # the run's maximum loss; its 167.2 s stall


def write_run(path: Path, lines: int) -> None:
    """Write ``lines`` lines of the run to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.connect().execute(f"""COPY (
        SELECT i + 1 AS step,
               CASE WHEN i + 1 = {SPIKE_STEP} THEN 42.5
                    ELSE 2.0 / (1 + i / 1e5) + (hash(i) % 1000) / 1e5 END AS loss,
               (hash(i * 3) % 1000) / 1e3 AS accuracy, 1e-4 AS lr,
               25000.0 + hash(i) % 1000 AS tok_per_sec, hash(i) % 8 AS hs_queue_depth,
               i * 0.5 + CASE WHEN i + 1 >= {STALL_STEP} THEN 167.2 ELSE 0 END AS elapsed_s,
               i // 100000 AS epoch, [i % 6, (i * 7) % 6] AS buckets
        FROM range({lines}) AS t(i)) TO '{path}' (FORMAT json)""")
