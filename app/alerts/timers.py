"""What moves on with time alone, for the states pending or firing: a pending ``for`` duration
that has run out fires, a firing incident that stopped growing settles, a firing alert repeats
every ``repeat``::

    judge(cursor, batch, by_name, active_keys, silences)   # inside the pass's transaction
"""

from __future__ import annotations

from ..db import queries
from . import incident_rule, lifecycle
from .rule_types import TYPES
from .state import PassWrites


def judge(cursor, batch: PassWrites, by_name: dict, keys: set, silences) -> None:
    """``keys``: the (rule, run, metric) keys pending or firing; ``by_name``: the rules in
    force by name (a state of a rule no longer in the file rests)."""
    for key in sorted(keys):
        st, rule = batch.peek(key), by_name.get(key[0])
        if rule is None or st is None:
            continue  # a rule no longer in the file: its states rest
        family = TYPES[rule.type].family
        if st.state == "pending" and family != "stall" and rule.for_s \
                and lifecycle.ready(rule, st, batch.now):
            st = batch.get(key)
            facts = st.detail.get("pending_facts") or {"step": st.changed_step,
                                                       "value": st.value}
            lifecycle.fire(batch, rule, st, dict(facts), silences)
        elif st.state == "firing" and family == "incident":
            incident_rule.settle(batch, rule, st, silences,
                                 lambda run, metric: latest_value(cursor, run, metric))
        st = batch.peek(key)
        if st.state == "firing":
            lifecycle.repeat(batch, rule, st, silences)


def latest_value(cursor, run: str, metric: str) -> float | None:
    """The newest finite value of a run's metric; None where no log has such a column (a
    stall's gap) or it has no finite value."""
    known = {f.name for f in queries.arrow_small(cursor, "read/tiles_columns").schema}
    if metric not in known:
        return None
    rows = queries.execute(cursor, "alerts/engine_trailing_values",
                           {"run": run, "before": 2**62, "n": 1},
                           identifiers={"column": metric}).fetchall()
    return float(rows[0][0]) if rows else None
