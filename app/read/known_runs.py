"""The answer to a run name that is not there: which runs are (issue 20, item 13)::

    unknown_run({"known": False, "total": 2, "newest": ["demo-2", "seed-replay"]}, "demo")
    -> "no run named 'demo'; the runs are demo-2, seed-replay"

Shared by the CLI's `sql` (which runs queries/run_known.sql locally or through the server) and
/api/incidents and /api/query/NAME (which run it on the server's cursor).
"""

from __future__ import annotations

from ..command import COMMAND

SHOWN = 10  # as many as queries/run_known.sql returns


def unknown_run(row: dict, run: str) -> str | None:
    """None when ``run`` exists; else what to say (``row``: run_known's one row)."""
    if row.get("known"):
        return None
    total, newest = int(row.get("total") or 0), list(row.get("newest") or [])
    if not total:
        return f"no run named {run!r}: the database holds no run yet (is --logdir right?)"
    more = (f" and {total - len(newest)} more (`{COMMAND} sql --query runs` or GET /api/runs "
            "lists them)" if total > len(newest) else "")
    return f"no run named {run!r}; the runs are {', '.join(newest)}{more}"
