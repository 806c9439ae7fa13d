"""The alert rules applied to what the database holds, one pass at a time::

    engine = Engine(db, rules, ["log"])
    queued = engine.evaluate(now=time.time())   # outbox rows written by this pass

A pass judges the new lines of the runs ingest stored something for (changes.py: one query,
which reads no row when nothing was stored), the incidents diagnosis changed, the stalls (the
live runs' facts, kept in memory, and the runs with a stall pending or firing), pending
``for`` durations, repeats and the end of silences; then it writes every state change,
transition, notification, outbox row and the runs' progress in ONE transaction. Memory holds
only caches of what the database says (states, progress, live runs' facts, the change rules'
trailing windows): a failed pass drops them and they are read again.
"""

from __future__ import annotations

import contextlib
import fnmatch
import itertools
import time
from collections import deque

import duckdb

from ..db import queries
from ..diagnose.detect import Watch
from ..diagnose.load import frame_of
from . import changes, incident_rule, lifecycle, lines, stall
from .lifecycle import Silence
from .rule_types import TYPES
from .state import ACTIVE, PassWrites, load_states

HISTORY_S = 3600.0  # a run silent this long when first met is history: its lines never alert
# A log of another trainer with no wall clock that holds this many lines when first met
# appeared whole (a copy with a fresh mtime, or history found at start-up): it is history. A
# live run is met a pass or two after its first line (20 lines a pass at 20 lines a second).
WHOLE_LINES = 200
MAX_LINES = 200_000  # lines read in one pass (a catch-up goes on at once in the next)


class Engine:
    def __init__(self, db, rules, target_ids: list[str], watch: Watch | None = None,
                 clock=time.time):
        self.db, self.rules, self.target_ids = db, list(rules), list(target_ids)
        self.watch, self.clock = watch or Watch(), clock
        self.by_name = {r.name: r for r in self.rules}
        self.line_rules = self._family("lines")
        self.stall_rules = self._family("stall")
        self.incident_rules = self._family("incident")
        self.reset()

    def _family(self, family: str) -> list:
        """The rules judged by one part of a pass (fields.RuleType.family)."""
        return [r for r in self.rules if TYPES[r.type].family == family]

    def reset(self) -> None:
        """Forget every cache; the next pass reads them from the database again."""
        cursor = self.db.cursor()
        self.states = load_states(cursor)
        self.active = {k for k, st in self.states.items() if st.state in ACTIVE}
        result = queries.execute(cursor, "alerts/engine_progress_load").fetchall()
        self.progress = {r[0]: {"last_line": r[1], "first_time": r[2], "history_step": r[3]}
                         for r in result}
        self.windows: dict[tuple, deque] = {}
        self.incidents_since = None
        self.stall = stall.StallJudge()
        self.rows_seen = changes.RowsSeen()
        self.behind = False  # the last pass left lines unread (MAX_LINES)

    def evaluate(self, now: float | None = None) -> int:
        """One pass; returns the outbox rows it queued (0 when nothing is to be sent)."""
        now = self.clock() if now is None else now
        cursor = self.db.cursor()
        batch = PassWrites(self.states, now)
        cursor.begin()
        try:
            silences = self._silences(cursor, now)
            look = self.rows_seen.look(cursor, now, self.progress, self._stalled())
            self._lines(cursor, batch, silences, look.changed)
            since = self._incidents(cursor, batch, silences)
            self._stalls(cursor, batch, silences, look.live)
            self._timers(cursor, batch, silences)
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
        self.windows = {}
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

    def _rules_for(self, rules, run: str):
        return [r for r in rules if fnmatch.fnmatchcase(run, r.runs)]

    # -- lines -------------------------------------------------------------------------
    def _lines(self, cursor, batch: PassWrites, silences, changed: list[tuple]) -> None:
        """``changed``: as alerts/engine_changed_runs (changes.Look)."""
        history = self._history(cursor, changed, batch.now)
        met = []
        for run, last_seen, last_line, first_time, history_step, _ in changed:
            if last_line is None:  # first meeting: a run silent for HISTORY_S is history,
                # judged only from its next line
                first_time, (last_line, history_step) = batch.now, history.get(run, (-1, None))
            met.append((run, last_seen, last_line, first_time, history_step))
        judged = {m[0]: m[2] for m in met if self._rules_for(self.line_rules, m[0])}
        frames, complete = self._new_lines(cursor, judged)
        for run, last_seen, last_line, first_time, history_step in met:
            if run in frames:
                last_line = self._judge_run(cursor, batch, run, frames[run], last_line,
                                            silences)
            # a run cut short by MAX_LINES keeps no `seen`: the next pass reads on
            seen = last_seen if complete or run not in judged else None
            batch.progress[run] = {"run": run, "last_line": last_line, "seen": seen,
                                   "first_time": first_time, "history_step": history_step}
        self.behind = not complete

    def _new_lines(self, cursor, afters: dict[str, int]) -> tuple[dict, bool]:
        """{run: frame of its new lines}, and whether every new line was read."""
        if not afters:
            return {}, True
        table = queries.arrow(cursor, "alerts/engine_new_lines", {
            "runs": list(afters), "afters": list(afters.values()),
            "min_after": min(afters.values()), "max_lines": MAX_LINES})
        frames, names, start = {}, table["run"].to_pylist(), 0
        for run, group in itertools.groupby(names):
            size = sum(1 for _ in group)
            frames[run] = frame_of(table.slice(start, size), self.watch)
            start += size
        return frames, table.num_rows < MAX_LINES

    def _history(self, cursor, changed: list[tuple], now: float) -> dict[str, tuple]:
        """{run: (last line, last step)} of the runs met for the first time that are history
        (judged only from their next line): silent for HISTORY_S, or a log of another trainer
        that was written before it was watched (a copy has a fresh mtime): ended, dated more
        than HISTORY_S back by its own clock, or with no clock and WHOLE_LINES lines already
        (alerts/engine_old_logs)."""
        met = [row for row in changed if row[2] is None and row[5] is not None]
        runs = [row[0] for row in met if row[5] < now - HISTORY_S]
        fresh = [row[0] for row in met if row[5] >= now - HISTORY_S]
        if fresh:
            runs += [row[0] for row in queries.execute(cursor, "alerts/engine_old_logs", {
                "runs": fresh, "before": now - HISTORY_S,
                "whole_lines": WHOLE_LINES}).fetchall()]
        if not runs:
            return {}
        found = {run: (-1, -1) for run in runs}  # no line yet: from the first
        rows = queries.execute(cursor, "alerts/engine_last_lines", {"runs": runs}).fetchall()
        found.update((run, (line, -1 if step is None else step)) for run, line, step in rows)
        return found

    def _judge_run(self, cursor, batch: PassWrites, run: str, frame, after: int, silences) -> int:
        for rule in self._rules_for(self.line_rules, run):
            for column in TYPES[rule.type].watched(rule, frame):
                key = (rule.name, run, column)
                series = self._series(cursor, rule, frame, column, key, after)
                if series is not None:
                    lines.judge(batch, rule, key, series, silences)
        return int(frame["line_id"].iat[-1])

    def _series(self, cursor, rule, frame, column: str, key, after: int):
        """The rule type's series of the column; a change rule reads its trailing window."""
        return TYPES[rule.type].series(rule, frame, column, key in self.active,
                                       lambda: self._window(cursor, rule, key, after))

    def _window(self, cursor, rule, key, after: int) -> deque:
        """The change rule's trailing values before this batch (from the database the first
        time, e.g. after a restart)."""
        if key not in self.windows and after < 0:
            self.windows[key] = deque(maxlen=rule.window)  # nothing before the first line
        if key not in self.windows:
            rows = queries.execute(cursor, "alerts/engine_trailing_values",
                                   {"run": key[1], "before": after, "n": rule.window},
                                   identifiers={"column": key[2]}).fetchall()
            self.windows[key] = deque((r[0] for r in reversed(rows)), maxlen=rule.window)
        return self.windows[key]

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
            for rule in self._rules_for(self.stall_rules, quiet.run):
                budget = self.stall.budget(rule, quiet) if stall.eligible(quiet) else None
                if budget is not None and stall.before_watch(quiet, budget):
                    budget = None  # silent past its budget already when met: no stall
                stall.judge(batch, rule, quiet, budget, silences)

    # -- timers ------------------------------------------------------------------------
    def _timers(self, cursor, batch: PassWrites, silences) -> None:
        """Pending `for` durations, incidents that stopped growing, repeats."""
        keys = self.active | {k for k, st in batch.dirty.items() if st.state in ACTIVE}
        for key in sorted(keys):
            st, rule = batch.peek(key), self.by_name.get(key[0])
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
