"""Chart tiles as the readers see them: the tile size, the derived gap metrics and which
columns tiles cover. The tiles themselves are written by the tile worker (app/tiler.py, which
says what a tile holds); app/read only reads them::

    columns(cursor)  ->  ["loss", "accuracy", "grad_norm"]      # what a tile rolls up
    GAPS             ->  ("~gap_s", "~gap_steps")                # the derived metrics beside them
"""

from __future__ import annotations

import pyarrow as pa

from ..db import queries

TILE_LINES = 512  # 10M lines -> 19,531 tiles; a 1M run charted in 1,000 buckets: ~2 a bucket
GAPS = ("~gap_s", "~gap_steps")
NOT_METRICS = {"attempt", "step", "file_id", "elapsed_s", "time", "epoch"}


def columns(cursor) -> list[str]:
    """The numeric metric columns tiles cover (not step, attempt, file_id, the x axes, epoch;
    not buckets or extra_metrics), in table order."""
    return metric_columns(queries.arrow_small(cursor, "read/tiles_columns").schema)


def metric_columns(schema: pa.Schema) -> list[str]:
    """columns(), from metric_rows' schema already read."""
    return [f.name for f in schema if f.name not in NOT_METRICS
            and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]
