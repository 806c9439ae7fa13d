"""A named query from queries/ run through the read-only helper, under the ad-hoc limits: what
``/api/query/NAME`` and the SQL page's named starting points share (below the HTTP layer, so
the dashboard never imports app.server)."""

from __future__ import annotations

from ..db import queries
from ..db.readonly import SqlResult, run_readonly
from ..errors import CliffwatchError
from ..state import current


def named(name: str, params: dict | None = None) -> SqlResult:
    """Run a named read query through the read-only helper, on this thread's cursor."""
    if "/" in name:
        raise CliffwatchError(f"no query named {name!r}", status=404)
    state = current()
    query = queries.load(name)
    return run_readonly(state.monitor.db.cursor(), query.text(), params=query.bind(params or {}),
                        max_rows=state.settings.sql_max_rows,
                        time_limit=state.settings.sql_time_limit,
                        max_bytes=state.settings.sql_max_bytes)
