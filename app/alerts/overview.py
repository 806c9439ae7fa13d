"""Everything about alerts in one JSON-ready dict: what ``GET /api/alerts`` answers and
``alerts list`` prints (from the server, or from the file when no server runs)::

    {"rules": [{"name": "stall", "type": "stall", "when": "no line for 10 × ...", ...}],
     "rules_source": "built-in rules",
     "targets": [{"id": "w3f9a1c2b7d40", "label": "https://hooks.slack.com/services/T…/…"}],
     "states": [{"rule": "stall", "run": "demo", "state": "firing", ...}],
     "silences": [{"id": 1, "rule": "stall", "run": "*", "until_time": ..., ...}],
     "notifications": [{"id": 7, "kind": "firing", "text": "[CRITICAL] stall on demo: ...",
                        "outbox": [{"target": "w3f9...", "status": "sent",
                                    "deliveries": [{"attempt": 1, "http_status": 200, ...}]}]}]}

Targets appear by id and redacted label only: the URL is a secret.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ..db import queries
from ..db.readonly import jsonable
from . import rules as rules_mod
from .targets import targets as configured_targets
from .webhook import parse_facts, text_line

RECENT = 50  # notifications shown


def overview(cursor, rules, source: str, targets, now: float | None = None,
             limit: int = RECENT) -> dict:
    now = time.time() if now is None else now
    notes = rows(cursor, "alerts/api_notifications", {"limit": limit})
    since = min((n["id"] for n in notes), default=0)
    outbox = rows(cursor, "alerts/api_outbox", {"since_id": since})
    tries = rows(cursor, "alerts/api_deliveries", {"since_id": since})
    for note in notes:
        note["facts"] = parse_facts(note["facts"])
        note["text"] = text_line({**_defaults(note), **note["facts"]})
        note["outbox"] = [_with_tries(o, tries) for o in outbox
                          if o["notification_id"] == note["id"]]
    return {"rules": [rule_json(r) for r in rules], "rules_source": source,
            "targets": [{"id": t.id, "label": t.label} for t in targets],
            "states": rows(cursor, "alerts/api_states"),
            "silences": rows(cursor, "alerts/api_silences", {"now": now}),
            "notifications": jsonable(notes)}


def active_rules(state) -> tuple[list, str]:
    """The rules the alert worker runs, or (before it is wired in) those it would load."""
    worker = getattr(state, "alerts", None)
    if worker is not None and getattr(worker, "rules", None) is not None:
        rules = list(worker.rules)
        return rules, getattr(worker, "source", None) or f"{len(rules)} rules in force"
    path = Path(state.settings.rules) if state.settings.rules else None
    return rules_mod.load_rules(path, state.monitor.logdir)


def active_targets(state) -> list:
    """The delivery worker's targets, or (before it is wired in) those the settings name."""
    delivery = getattr(state, "delivery", None)
    return list(delivery.targets) if delivery is not None else configured_targets(state.settings)


def rule_json(rule) -> dict:
    return {**dataclasses.asdict(rule), "when": rules_mod.describe(rule)}


def rows(cursor, name: str, params: dict | None = None) -> list[dict]:
    """A named query's rows as JSON-safe dicts (the API's and `alerts list`'s shape)."""
    result = queries.execute(cursor, name, params)
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, (jsonable(v) for v in row), strict=True))
            for row in result.fetchall()]


def _with_tries(row: dict, tries: list[dict]) -> dict:
    mine = [{k: v for k, v in t.items() if k not in ("notification_id", "target")}
            for t in tries
            if t["notification_id"] == row["notification_id"] and t["target"] == row["target"]]
    return {**{k: v for k, v in row.items() if k != "notification_id"}, "deliveries": mine}


def _defaults(note: dict) -> dict:
    return {k: note[k] for k in ("rule", "run", "metric", "kind", "severity")}
