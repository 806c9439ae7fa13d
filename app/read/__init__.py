"""What the dashboard and the API read: below both of them, above app/db.

These are our own named queries (queries/read/*.sql) on a plain cursor, not ad-hoc SQL: they
are not bound by ``sql_max_rows`` or the ad-hoc query slots, and each is bounded by design
instead (a chart's series has at most a few thousand points, whatever the run's length).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..db import queries

if TYPE_CHECKING:  # not at import: the CLI's `sql` imports app.read.known_runs, not pandas
    import pandas as pd


def frame(cursor, name: str, params: dict | None = None) -> pd.DataFrame:
    """A named query's result as a DataFrame, through Arrow (no per-value Python objects)."""
    return queries.arrow_small(cursor, name, params).to_pandas()
