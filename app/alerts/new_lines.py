"""Which lines a pass judges: the new lines of the runs that changed, read as one frame per run,
and which runs met for the first time are history (their lines never alert)::

    frames, complete = read(cursor, {"run-a": 41, "run-b": -1}, watch)
    frames["run-a"]   # a frame (diagnose.load.frame_of) of run-a's lines after line 41
    complete          # False when MAX_LINES cut the read short: the next pass reads on
    history(cursor, look.changed, now)   # {run: (last line, last step)} of the runs met as history
    still_history(frame, history_step, judged_at, now)   # a copy still being read: no alerts
"""

from __future__ import annotations

import itertools

import numpy as np

from ..db import queries
from ..diagnose.detect import CLOCK, Watch
from ..diagnose.load import frame_of

HISTORY_S = 3600.0  # a run silent this long when first met is history: its lines never alert
# A log of another trainer with no wall clock that holds this many lines when first met
# appeared whole (a copy with a fresh mtime, or history found at start-up): it is history. A
# live run is met a pass or two after its first line (20 lines a pass at 20 lines a second).
WHOLE_LINES = 200
MAX_LINES = 200_000  # lines read in one pass (a catch-up goes on at once in the next)
# A run met as history whose next lines span this many times more of their own clock than
# the wall-clock seconds since it was last judged history, and CATCH_UP_SLACK_S more, was
# read faster than any trainer writes: a copy of an old log, or an event file, still being
# read when the rules met it (a TensorBoard log written with last year's clock, met at step
# 324 of 2999, paged a spike and a stall from the rest). A live run whose clock is hours off
# writes at its clock's pace and is judged as before.
CATCH_UP_RATIO, CATCH_UP_SLACK_S = 10.0, 60.0


def read(cursor, afters: dict[str, int], watch: Watch) -> tuple[dict, bool]:
    """{run: frame of its lines after ``afters[run]``}, and whether every new line was read."""
    if not afters:
        return {}, True
    table = queries.arrow(cursor, "alerts/engine_new_lines", {
        "runs": list(afters), "afters": list(afters.values()),
        "min_after": min(afters.values()), "max_lines": MAX_LINES})
    frames, names, start = {}, table["run"].to_pylist(), 0
    for run, group in itertools.groupby(names):
        size = sum(1 for _ in group)
        frames[run] = frame_of(table.slice(start, size), watch)
        start += size
    return frames, table.num_rows < MAX_LINES


def history(cursor, changed: list[tuple], now: float) -> dict[str, tuple]:
    """{run: (last line, last step)} of the runs met for the first time that are history
    (judged only from their next line): silent for HISTORY_S, or a log of another trainer
    that was written before it was watched (a copy has a fresh mtime): ended, dated more
    than HISTORY_S back by its own clock, or with no clock and WHOLE_LINES lines already
    (alerts/engine_old_logs). ``changed``: as changes.Look.changed."""
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


def still_history(frame, history_step: int | None, judged_at: float | None,
                  now: float) -> bool:
    """Whether a run met as history (``history_step`` not None; last judged history at
    ``judged_at``) stays history with the new lines of ``frame``: they span more of their own
    clock than CATCH_UP_RATIO x the seconds since then + CATCH_UP_SLACK_S; with no clock, at
    least WHOLE_LINES lines came, more than CATCH_UP_RATIO a second."""
    if history_step is None or judged_at is None or frame.empty:
        return False
    since = max(now - judged_at, 0.0)
    clock = frame[CLOCK].to_numpy(dtype=float) if CLOCK in frame else np.array([])
    clock = clock[np.isfinite(clock)]
    if len(clock) >= 2:
        return float(clock.max() - clock.min()) > CATCH_UP_RATIO * since + CATCH_UP_SLACK_S
    return len(frame) >= WHOLE_LINES and len(frame) > CATCH_UP_RATIO * since
