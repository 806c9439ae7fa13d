"""The ``incident`` rule: an incident live diagnosis stored (``incidents`` table) of the
listed kinds fires, carrying its causes and evidence sentences.

State per (rule, run, "KIND:METRIC@STEP"): one per incident, fired once. Diagnosis grows an
incident's episode while it lasts; once the incident has not grown for ``QUIET_S`` seconds
(the table does not say when an episode is over) a spike, divergence or cliff resolves only if
its metric's newest value is back near its baseline (``BACK_SHARE`` of the way from the worst
point). Otherwise it stays firing, and one message says it stopped getting worse and where it
stands ("still 0.0007 against 0.1608 before"); it resolves when the metric comes back (looked
at once every ``QUIET_S``). The other kinds (a stall, a NaN) are over once they stop growing.

An incident's ``value`` is its episode's worst (the top of a spike, the bottom of a cliff),
logged at ``worst_step``; ``step`` is the episode's first line, the one the alert is keyed on.
The message quotes the worst point where it was ("peak 13 at step 2029"), and its link opens
the whole episode (webhook.link reads ``end_step``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..db import queries
from . import lifecycle
from .fields import KINDS, Field, RuleType, list_of, one_of
from .state import PassWrites
from .webhook import incident_subject, number, unit

if TYPE_CHECKING:  # rules.py builds Rule from the types declared here and in lines.py
    from .rules import Rule

QUIET_S = 60.0
# kinds whose metric has a way back to its baseline, and how much of the way from the worst
# point makes it "back": a cliff from 0.16 to 0.0007 is back at 0.13, not at 0.05
RECOVERS = ("spike", "divergence", "cliff")
BACK_SHARE = 0.8
Latest = Callable[[str, str], "float | None"]  # (run, metric) -> its newest finite value


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


def judge(batch: PassWrites, rule: Rule, found: Found, silences) -> None:
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


def fire_if_ready(batch: PassWrites, rule: Rule, st, found: Found, silences) -> None:
    if st.state == "pending" and batch.now - st.pending_time >= rule.for_s:
        lifecycle.fire(batch, rule, st, facts(found), silences)


def facts(found: Found) -> dict:
    first = f"; likely cause: {found.causes[0]}" if found.causes else ""
    where = f"{incident_subject(found.kind, found.metric)} at step {found.step}" + (
        f" (through {found.end_step})" if found.end_step not in (None, found.step) else "")
    summary = (f"{where}: {worst(found.kind, found.value, found.worst_step, found.step)} "
               f"against a typical {number(found.baseline, _unit(found.kind))}{first}"
               if found.value is not None and found.baseline is not None
               else f"{where}{first}")
    return {"metric": found.metric, "step": found.step, "value": found.value,
            "typical": found.baseline, "causes": found.causes, "evidence": found.evidence,
            "summary": summary, "incident": found.kind, "end_step": found.end_step,
            "worst_step": found.step if found.worst_step is None else found.worst_step}


def worst(kind: str, value: float, worst_step: int | None, step: int) -> str:
    """The episode's worst value, named and placed: ``peak 13 at step 2029`` (the step left
    out where it is the first line's, which the sentence already names)."""
    name = {"spike": "peak ", "divergence": "peak ", "cliff": "bottom ",
            "stall": "gap "}.get(kind, "")
    at = "" if worst_step in (None, step) else f" at step {worst_step}"
    return f"{name}{number(value, _unit(kind))}{at}"


def _unit(kind: str) -> str:
    return unit({"incident": kind})


def settle(batch: PassWrites, rule: Rule, st, silences, latest: Latest) -> None:
    """Timer: an incident that stopped growing is over, if its metric came back (``latest``
    reads the metric's newest value: asked at most once every QUIET_S per incident)."""
    if st.state != "firing" or batch.now - st.detail.get("grown_time", 0) < QUIET_S:
        return
    first = st.detail.get("pending_facts") or {}
    if first.get("incident") not in RECOVERS:
        lifecycle.clear(batch, rule, batch.get(st.key), over(st.detail), silences)
        return
    if batch.now - st.detail.get("checked_time", -QUIET_S) < QUIET_S:
        return
    value = latest(st.run, first.get("metric") or "")
    if value is None or back(first, value):  # None: no value to judge by, as before
        lifecycle.clear(batch, rule, batch.get(st.key), over(st.detail, value), silences)
        return
    st = batch.get(st.key)
    told = "checked_time" in st.detail
    st.detail["checked_time"] = batch.now
    if not told:
        lifecycle.update(batch, rule, st, stuck(st.detail, value), silences)


def back(first: dict, value: float) -> bool:
    """Is ``value`` back near the incident's baseline (BACK_SHARE of the way from its worst)?"""
    baseline, worst_value = first.get("typical"), first.get("value")
    if not all(isinstance(v, (int, float)) for v in (baseline, worst_value)):
        return True  # nothing to measure the way back by
    return abs(value - baseline) <= (1 - BACK_SHARE) * abs(worst_value - baseline)


def _what(first: dict) -> str:
    return f"{incident_subject(first.get('incident', 'incident'), first.get('metric'))} at step " \
           f"{first.get('step')}"


def _worst_text(first: dict) -> str:
    """``bottom 0.0007 at step 4495``, or "" without a worst value."""
    value, step = first.get("value"), first.get("step")
    if not isinstance(value, (int, float)) or step is None:
        return ""
    return worst(first.get("incident", ""), value, first.get("worst_step"), step)


def stuck(detail: dict, value: float) -> dict:
    """Facts of the message that says an incident stopped getting worse but is not over."""
    first = detail.get("pending_facts") or {}
    end, seconds, low = detail.get("end_step"), _unit(first.get("incident", "")), \
        _worst_text(first)
    summary = (f"{_what(first)} stopped getting worse at step {end} but has not recovered: "
               f"still {number(value, seconds)} against {number(first.get('typical'), seconds)} "
               f"before" + (f" ({low})" if low else ""))
    return {**first, "value": value, "summary": summary}


def over(detail: dict, value: float | None = None) -> dict:
    """The resolved message's facts, in the words of the firing one (the state's own metric
    field is the incident's key, `spike:loss@2029`, which is no name for a reader), with the
    metric's newest value where it was looked at."""
    first = detail.get("pending_facts") or {}
    end, kind = detail.get("end_step"), first.get("incident", "")
    now = ("" if value is None else
           f": back to {number(value, _unit(kind))} against "
           f"{number(first.get('typical'), _unit(kind))} before")
    return {"step": end, "metric": first.get("metric"), "incident": first.get("incident"),
            "summary": f"{_what(first)} is over{now} (last grew at step {end}"
                       + (f"; {_worst_text(first)})" if _worst_text(first) else ")")}


def _kinds(raw: object) -> tuple[str, ...]:
    kinds = list_of(one_of(KINDS), '["spike", "cliff"]')(raw)
    if not kinds:
        raise ValueError(f"is empty; list some of {', '.join(KINDS)}")
    return kinds


def _incident_text(rule: Rule, held: str) -> str:
    return f"an incident of kind {', '.join(rule.kinds)}"


RULE_TYPE = RuleType("incident", "incident", (
    # also nonfinite and straggler allowed; a frozen loss and a crash waste the GPUs as a
    # divergence does
    Field("kinds", "kinds", _kinds, f"kinds = {list(KINDS[:3])}".replace("'", '"'),
          default=("spike", "cliff", "stall", "divergence", "frozen", "crash")),
), _incident_text)
