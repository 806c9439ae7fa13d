"""The alert rules applied to what the database holds, one pass at a time::

    engine = Engine(db, rules, ["log"])
    queued = engine.evaluate(now=time.time())   # outbox rows written by this pass

A pass judges the new lines of the runs ingest stored something for (changes.py: one query,
which reads no row when nothing was stored; line_judge.py judges them), the incidents diagnosis
changed, the stalls (the live runs' facts, kept in memory, and the runs with a stall pending or
firing), then what moves on with time alone (timers.py: pending ``for`` durations, repeats,
incidents that stopped growing); then it writes every state change, transition, notification,
outbox row and the runs' progress in ONE transaction. Memory holds only caches of what the
database says (states, progress, live runs' facts, the change rules' trailing windows): a
failed pass drops them and they are read again.
"""

from __future__ import annotations

import contextlib
import time

import duckdb

from ..db import queries
from ..diagnose.detect import Watch
from . import changes, incident_rule, stall, timers
from .lifecycle import Silence
from .line_judge import LineJudge, rules_for
from .rule_types import TYPES
from .state import ACTIVE, PassWrites, load_states


def family(rules, name: str) -> list:
    """The rules judged by one part of a pass (fields.RuleType.family)."""
    return [r for r in rules if TYPES[r.type].family == name]


class Engine:
    def __init__(self, db, rules, target_ids: list[str], watch: Watch | None = None,
                 clock=time.time):
        self.db, self.rules, self.target_ids = db, list(rules), list(target_ids)
        self.watch, self.clock = watch or Watch(), clock
        self.by_name = {r.name: r for r in self.rules}
        self.stall_rules = family(self.rules, "stall")
        self.incident_rules = family(self.rules, "incident")
        self.reset()

    @property
    def behind(self) -> bool:
        """The last pass left lines unread (new_lines.MAX_LINES): the next goes on at once."""
        return self.lines.behind

    def reset(self) -> None:
        """Forget every cache; the next pass reads them from the database again."""
        cursor = self.db.cursor()
        self.states = load_states(cursor)
        self.active = {k for k, st in self.states.items() if st.state in ACTIVE}
        result = queries.execute(cursor, "alerts/engine_progress_load").fetchall()
        self.progress = {r[0]: {"last_line": r[1], "first_time": r[2], "history_step": r[3]}
                         for r in result}
        self.lines = LineJudge(family(self.rules, "lines"), self.watch)
        self.incidents_since = None
        self.stall = stall.StallJudge()
        self.rows_seen = changes.RowsSeen()

    def evaluate(self, now: float | None = None) -> int:
        """One pass; returns the outbox rows it queued (0 when nothing is to be sent)."""
        now = self.clock() if now is None else now
        cursor = self.db.cursor()
        batch = PassWrites(self.states, now)
        cursor.begin()
        try:
            silences = self._silences(cursor, now)
            look = self.rows_seen.look(cursor, now, self.progress, self._stalled())
            self.lines.judge(cursor, batch, silences, look.changed, self.active)
            since = self._incidents(cursor, batch, silences)
            self._stalls(cursor, batch, silences, look.live)
            active = self.active | {k for k, st in batch.dirty.items() if st.state in ACTIVE}
            timers.judge(cursor, batch, self.by_name, active, silences)
            queued = batch.commit(cursor, self.target_ids)
            cursor.commit()
        except BaseException:
            self._undo(cursor)
            raise
        self._applied(batch, since)
        self.rows_seen.applied(look, not self.behind, set(self._stalled()))
        return queued

    def _undo(self, cursor) -> None:
        """After a failed pass: nothing of it was written; the caches it touched (the change
        windows) are dropped and the rest read again when the database answers."""
        self.lines.drop_windows()
        self.db.rollback(cursor)
        with contextlib.suppress(duckdb.Error):
            self.reset()

    def _applied(self, batch: PassWrites, since) -> None:
        batch.applied()
        for key, st in batch.dirty.items():
            (self.active.add if st.state in ACTIVE else self.active.discard)(key)
        for run, row in batch.progress.items():
            self.progress[run] = {k: row[k] for k in ("last_line", "first_time", "history_step")}
        self.incidents_since = since

    def _silences(self, cursor, now: float) -> list[Silence]:
        rows = queries.execute(cursor, "alerts/engine_silences_active", {"now": now}).fetchall()
        return [Silence(*row) for row in rows]

    # -- incidents ---------------------------------------------------------------------
    def _incidents(self, cursor, batch: PassWrites, silences):
        if not self.incident_rules:
            return self.incidents_since
        since = self.incidents_since
        for found in incident_rule.changed_since(cursor, since):
            since = found.updated_at if since is None else max(since, found.updated_at)
            progress = batch.progress.get(found.run) or self.progress.get(found.run) or {}
            for rule in self.incident_rules:
                if incident_rule.applies(rule, found, progress.get("history_step")):
                    incident_rule.judge(batch, rule, found, silences)
        return since

    # -- stalls ------------------------------------------------------------------------
    def _stalled(self) -> list[str]:
        """Runs with a stall pending or firing."""
        return sorted({k[1] for k in self.active if self.by_name.get(k[0]) in self.stall_rules})

    def _stalls(self, cursor, batch: PassWrites, silences, live: dict) -> None:
        """``live``: the facts of the runs still running and those with a stall active."""
        if not self.stall_rules:
            return
        quiet_s = min(min(r.min_s, r.checkpoint_budget_s) for r in self.stall_rules)
        quiets = stall.quiet_runs(live, self.progress, batch.now - quiet_s,
                                  set(self._stalled()))
        self.stall.prepare(cursor, [q for q in quiets if stall.eligible(q)])
        for quiet in quiets:
            for rule in rules_for(self.stall_rules, quiet.run):
                budget = self.stall.budget(rule, quiet) if stall.eligible(quiet) else None
                if budget is not None and stall.before_watch(quiet, budget):
                    budget = None  # silent past its budget already when met: no stall
                stall.judge(batch, rule, quiet, budget, silences)
