"""inactive -> pending -> firing -> resolved (-> pending again, a new episode), the same for
every rule type; the types only say when their condition holds and what to tell.

A notification is written in the batch of the change that causes it. A silence in force
(rule glob and run glob match) keeps it with ``silenced = true`` and no outbox rows; the state
changes all the same. A firing whose message was never sent (silenced) or was sent longer
than ``repeat`` ago gets a ``repeat`` once no silence matches.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from .state import AlertState, Note, PassWrites, json_number, note_key


@dataclass(frozen=True)
class Silence:
    id: int
    rule: str  # glob on rule names
    run: str  # glob on run names
    until_time: float

    def matches(self, rule: str, run: str) -> bool:
        return fnmatch.fnmatchcase(rule, self.rule) and fnmatch.fnmatchcase(run, self.run)


def silenced(silences: list[Silence], rule: str, run: str) -> bool:
    return any(s.matches(rule, run) for s in silences)


def begin(batch: PassWrites, st: AlertState, *, step, value, since: float | None = None) -> None:
    """The condition started holding: pending (a new episode after resolved)."""
    batch.move(st, "pending", step=step, value=value)
    st.pending_time = batch.now if since is None else since
    st.pending_lines = 0


def ready(rule, st: AlertState, now: float) -> bool:
    """Has a pending condition held long enough (lines and seconds) to fire?"""
    return st.pending_lines >= rule.for_lines and now - (st.pending_time or now) >= rule.for_s


def fire(batch: PassWrites, rule, st: AlertState, facts: dict, silences: list[Silence]) -> None:
    st.episode += 1
    st.repeats = 0
    st.notified_time = None
    batch.move(st, "firing", step=facts.get("step"), value=facts.get("value"))
    _notify(batch, rule, st, "firing", facts, silences)


def clear(batch: PassWrites, rule, st: AlertState, facts: dict, silences: list[Silence]) -> None:
    """The condition no longer holds: pending -> inactive, firing -> resolved."""
    if st.state == "pending":
        batch.move(st, "inactive", step=facts.get("step"), value=facts.get("value"))
    elif st.state == "firing":
        batch.move(st, "resolved", step=facts.get("step"), value=facts.get("value"))
        if rule.notify_resolved:
            # a resolved message about a firing nobody was told of would only confuse
            _notify(batch, rule, st, "resolved", facts, silences,
                    keep=st.notified_time is None)
    st.pending_time, st.pending_lines = None, 0


def repeat(batch: PassWrites, rule, st: AlertState, silences: list[Silence]) -> None:
    """Re-notify a firing state that is due (never sent, or sent over `repeat` ago)."""
    if silenced(silences, st.rule, st.run):
        return
    if st.notified_time is not None and batch.now - st.notified_time < rule.repeat_s:
        return
    st = batch.get(st.key)
    st.repeats += 1
    facts = dict(st.detail.get("facts") or {}, step=st.changed_step,
                 value=json_number(st.value))
    _notify(batch, rule, st, "repeat", facts, silences)


def update(batch: PassWrites, rule, st: AlertState, facts: dict, silences: list[Silence]) -> None:
    """News of a firing state that changes no state (an incident stopped getting worse but
    has not recovered): a `repeat` notification with its own summary, which later repeats
    quote."""
    st.repeats += 1
    st.detail["facts"] = dict(st.detail.get("facts") or {}, summary=facts.get("summary", ""))
    _notify(batch, rule, st, "repeat", facts, silences)


def _notify(batch: PassWrites, rule, st: AlertState, kind: str, facts: dict,
            silences: list[Silence], keep: bool = False) -> None:
    muted = keep or silenced(silences, st.rule, st.run)
    full = {"rule": rule.name, "type": rule.type, "severity": rule.severity, "kind": kind,
            "run": st.run, "metric": st.metric or None, "value": None, "typical": None,
            "step": None, "time": batch.now, "causes": [], "evidence": [], "summary": "",
            "checkpoint": None, **facts}
    full["value"], full["typical"] = json_number(full["value"]), json_number(full["typical"])
    if kind == "firing":
        st.detail["facts"] = {k: full[k] for k in ("metric", "typical", "summary", "causes",
                                                   "evidence", "checkpoint")}
    if kind in ("firing", "repeat") and not muted:
        st.notified_time = batch.now
    if kind == "repeat":
        full["summary"] = f"still firing: {full['summary']}"
    batch.notify(Note(note_key(st, kind), rule.name, st.run, st.metric or None, kind,
                      rule.severity, batch.now, muted, full))
