"""The line rules (threshold, change, nonfinite) over one pass's new lines: which runs and
columns each rule watches, the series its type judges, and the change rules' trailing windows,
kept in memory between passes::

    judge = LineJudge(line_rules, watch)
    judge.judge(cursor, batch, silences, look.changed, active)
    batch.progress["run-a"]   # {"run": "run-a", "last_line": 1041, "seen": ..., ...}
    judge.behind              # True when MAX_LINES left lines unread: the next pass reads on
"""

from __future__ import annotations

import fnmatch
from collections import deque

from ..db import queries
from ..diagnose.detect import Watch
from . import lines, new_lines
from .rule_types import TYPES
from .state import PassWrites


def rules_for(rules, run: str) -> list:
    """The rules whose ``runs`` glob names the run."""
    return [r for r in rules if fnmatch.fnmatchcase(run, r.runs)]


class LineJudge:
    def __init__(self, rules, watch: Watch):
        self.rules, self.watch = rules, watch
        self.windows: dict[tuple, deque] = {}
        self.behind = False  # the last pass left lines unread (new_lines.MAX_LINES)

    def drop_windows(self) -> None:
        """After a failed pass: the windows it may have moved are read again."""
        self.windows = {}

    def judge(self, cursor, batch: PassWrites, silences, changed: list[tuple],
              active: set) -> None:
        """``changed``: as alerts/engine_changed_runs (changes.Look); ``active``: the keys
        pending or firing before this pass."""
        history = new_lines.history(cursor, changed, batch.now)
        met = []
        for run, last_seen, last_line, first_time, history_step, _ in changed:
            if last_line is None:  # first meeting: a run silent for HISTORY_S is history,
                # judged only from its next line
                first_time, (last_line, history_step) = batch.now, history.get(run, (-1, None))
            met.append((run, last_seen, last_line, first_time, history_step))
        # a history run's lines are read too: whether they are still history (a copy)
        judged = {m[0]: m[2] for m in met if rules_for(self.rules, m[0]) or m[4] is not None}
        frames, complete = new_lines.read(cursor, judged, self.watch)
        for run, last_seen, last_line, first_time, history_step in met:
            frame = frames.get(run)
            if frame is None:
                pass
            elif new_lines.still_history(frame, history_step, first_time, batch.now):
                # met again now, as history up to its newest line: a write after this pass
                # is one the rules saw (stall.eligible), the alerts judge only later lines
                last_line, first_time = int(frame["line_id"].iat[-1]), batch.now
                history_step = max(history_step, int(frame["step"].max()))
            elif rules_for(self.rules, run):
                last_line = self._judge_run(cursor, batch, run, frame, last_line, silences,
                                            active)
            else:
                last_line = int(frame["line_id"].iat[-1])
            # a run cut short by MAX_LINES keeps no `seen`: the next pass reads on
            seen = last_seen if complete or run not in judged else None
            batch.progress[run] = {"run": run, "last_line": last_line, "seen": seen,
                                   "first_time": first_time, "history_step": history_step}
        self.behind = not complete

    def _judge_run(self, cursor, batch: PassWrites, run: str, frame, after: int, silences,
                   active: set) -> int:
        for rule in rules_for(self.rules, run):
            for column in TYPES[rule.type].watched(rule, frame):
                key = (rule.name, run, column)
                series = TYPES[rule.type].series(
                    rule, frame, column, key in active,
                    lambda rule=rule, key=key: self._window(cursor, rule, key, after))
                if series is not None:
                    lines.judge(batch, rule, key, series, silences)
        return int(frame["line_id"].iat[-1])

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
