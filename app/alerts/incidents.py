"""The ``incident`` rule: an incident live diagnosis stored (``incidents`` table) of the
listed kinds fires, carrying its causes and evidence sentences.

State per (rule, run, "KIND:METRIC@STEP"): one per incident, fired once. Diagnosis grows an
incident's episode while it lasts; the alert resolves once the incident has not grown for
``QUIET_S`` seconds (the table does not say when an episode is over).

An incident's ``value`` is its episode's worst (the top of a spike, the bottom of a cliff),
logged at ``worst_step``; ``step`` is the episode's first line, the one the alert is keyed on.
The message quotes the worst point where it was ("peak 13 at step 2029"), and its link opens
the whole episode (webhook.link reads ``end_step``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from ..db import queries
from . import lifecycle
from .rules import Rule
from .state import Batch

QUIET_S = 60.0


@dataclass(frozen=True)
class Found:
    run: str
    kind: str
    metric: str
    step: int
    end_step: int
    worst_step: int | None
    value: float | None
    baseline: float | None
    causes: list
    evidence: list
    updated_at: object


def changed_since(cursor, since) -> list[Found]:
    result = queries.execute(cursor, "alerts/engine_incidents_since", {"since": since})
    names = [d[0] for d in result.description]  # by name: a column added moves no other
    found = []
    for row in result.fetchall():
        got = dict(zip(names, row, strict=True))
        got["causes"], got["evidence"] = list(got["causes"] or []), list(got["evidence"] or [])
        found.append(Found(**got))
    return found


def applies(rule: Rule, found: Found, history_step: int | None) -> bool:
    if found.kind not in rule.kinds or not fnmatch.fnmatchcase(found.run, rule.runs):
        return False
    return history_step is None or found.step > history_step


def judge(batch: Batch, rule: Rule, found: Found, silences) -> None:
    key = (rule.name, found.run, f"{found.kind}:{found.metric}@{found.step}")
    st = batch.peek(key)
    if st is not None:  # known (also after a restart, which reads every incident again)
        if st.detail.get("end_step") != found.end_step:  # the episode grew
            st = batch.get(key)
            # and may have a new worst point: a firing still pending or the resolved
            # message quotes it
            st.detail.update(end_step=found.end_step, grown_time=batch.now,
                             pending_facts=facts(found))
        return
    st = batch.get(key)
    lifecycle.begin(batch, st, step=found.step, value=found.value)
    st.detail.update(step=found.step, end_step=found.end_step, grown_time=batch.now,
                     pending_facts=facts(found))
    fire_if_ready(batch, rule, st, found, silences)


def fire_if_ready(batch: Batch, rule: Rule, st, found: Found, silences) -> None:
    if st.state == "pending" and batch.now - st.pending_time >= rule.for_s:
        lifecycle.fire(batch, rule, st, facts(found), silences)


def facts(found: Found) -> dict:
    first = f"; likely cause: {found.causes[0]}" if found.causes else ""
    where = f"{found.kind} in {found.metric} at step {found.step}" + (
        f" (through {found.end_step})" if found.end_step not in (None, found.step) else "")
    summary = (f"{where}: {worst(found.kind, found.value, found.worst_step, found.step)} "
               f"against a typical {found.baseline:.4g}{first}"
               if found.value is not None and found.baseline is not None
               else f"{where}{first}")
    return {"metric": found.metric, "step": found.step, "value": found.value,
            "typical": found.baseline, "causes": found.causes, "evidence": found.evidence,
            "summary": summary, "incident": found.kind, "end_step": found.end_step,
            "worst_step": found.step if found.worst_step is None else found.worst_step}


def worst(kind: str, value: float, worst_step: int | None, step: int) -> str:
    """The episode's worst value, named and placed: ``peak 13 at step 2029`` (the step left
    out where it is the first line's, which the sentence already names)."""
    name = {"spike": "peak ", "divergence": "peak ", "cliff": "bottom "}.get(kind, "")
    at = "" if worst_step in (None, step) else f" at step {worst_step}"
    return f"{name}{value:.4g}{at}"


def settle(batch: Batch, rule: Rule, st, silences) -> None:
    """Timer: an incident that stopped growing is over."""
    if st.state == "firing" and batch.now - st.detail.get("grown_time", 0) >= QUIET_S:
        st = batch.get(st.key)
        lifecycle.clear(batch, rule, st, over(st.detail), silences)


def over(detail: dict) -> dict:
    """The resolved message's facts, in the words of the firing one (the state's own metric
    field is the incident's key, `spike:loss@2029`, which is no name for a reader)."""
    first = detail.get("pending_facts") or {}
    end = detail.get("end_step")
    kind, metric = first.get("incident", "incident"), first.get("metric")
    what = f"{kind} in {metric} at step {first.get('step')}"
    value, step = first.get("value"), first.get("step")
    at = (f"; {worst(kind, value, first.get('worst_step'), step)}"
          if isinstance(value, (int, float)) and step is not None else "")
    return {"step": end, "metric": first.get("metric"),
            "summary": f"{what} is over (last grew at step {end}{at})"}
