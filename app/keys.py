"""The key names of log format v1 (docs/log-format.md), stated once.

A metrics line is ``step`` plus metrics, with a few keys that mean something else::

    {"step": 2000, "loss": 0.81, "elapsed_s": 20004.1, "epoch": 1, "buckets": [5, 2]}

Here ``loss`` is the only metric. The validator (logformat.py), the careful parse path
(ingest/parse.py) and the detector (diagnose/detect.py) take these names from this module, so
a key cannot be special to one of them and a metric to another.
"""

from __future__ import annotations

STEP = "step"  # required: a JSON integer within BIGINT (7, never 7.0 or "7")
ELAPSED_S = "elapsed_s"  # seconds since the attempt started
TIME = "time"  # Unix seconds
CLOCKS = (ELAPSED_S, TIME)
EPOCH = "epoch"
BUCKETS = "buckets"  # list of integer bucket ids
EVENT = "event"  # its presence makes the line an event, not metrics
# Keys special when spelled exactly; each has a column of its own (ingest/columns.py types them).
SPECIAL = frozenset({STEP, ELAPSED_S, TIME, EPOCH, BUCKETS})
FORMAT_KEYS = SPECIAL | {EVENT}  # every key of a metrics line that is not a metric
# The monitor's own columns of the metrics tables (and DuckDB's rowid). A log key that folds to
# one of them is stored with a prefix (ingest/columns.py), so none is ever a metric.
MONITOR_COLUMNS = frozenset({"run", "attempt", "file_id", "ingested_at", "rank", "rowid",
                             "line_id", "kind", "extra_metrics"})
NOT_METRICS = SPECIAL | MONITOR_COLUMNS  # columns of metrics/metrics_all that are no metric
INT64 = (-(2**63), 2**63 - 1)
# No log key: the monitor's name for the seconds between two lines, a stall incident's metric,
# as the Run page, the time_gaps and stalls queries and alert messages say it (issue 20, item
# 16; migration 0024 renamed the interval_s stored before)
GAP = "gap_s"


def is_step(value: object) -> bool:
    """Whether ``value`` is a valid ``step``: an integer (not a bool, not 7.0) within BIGINT.
    The validator and ingest both ask this, so what one accepts the other stores."""
    return type(value) is int and INT64[0] <= value <= INT64[1]
