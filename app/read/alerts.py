"""Alerts as the Alerts page and ``/api/alerts`` both read them: the rules and targets in
force, states, silences, recent notifications, how each webhook answered a test message, and
the firings the Run page marks (what changes them is app/alerts/actions.py's)::

    overview(state)          -> {"rules": [...], "states": [...], ...}  (GET /api/alerts)
    test_results(state, 12)  -> [{"target": "w3f9...", "status": "sent", "label": ...}]
    firings(cursor, "demo")  -> the run's alert firings as markers
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..alerts import overview as overview_mod
from ..alerts.overview import active_rules, active_targets

if TYPE_CHECKING:  # the API's answers need no pandas: the server starts without it
    import pandas as pd


def overview(state) -> dict:
    """Rules, targets (redacted), states, silences, recent notifications with deliveries."""
    rules, source = active_rules(state)
    return overview_mod.overview(state.monitor.db.cursor(), rules, source,
                                 active_targets(state))


def test_results(state, nid: int) -> list[dict]:
    """How each webhook answered test message ``nid`` (status pending until it did)."""
    delivery = getattr(state, "delivery", None)
    labels = {t.id: t.label for t in (delivery.targets if delivery is not None else [])}
    return [{**r, "label": labels.get(r["target"], r["target"])}
            for r in rows(state, "alerts/api_test_results", {"notification_id": nid})]


def firings(cursor, run: str, *, lo: int | None = None, hi: int | None = None,
            x: str = "step") -> pd.DataFrame:
    """The run's alert firings as markers (kind "alert"): the same rows markers() holds."""
    from .markers import markers  # pandas: the pages' import, not the API's

    found = markers(cursor, run, lo=lo, hi=hi, x=x)
    return found[found["kind"] == "alert"].reset_index(drop=True)


def rows(state, name: str, params: dict) -> list[dict]:
    return overview_mod.rows(state.monitor.db.cursor(), name, params)
