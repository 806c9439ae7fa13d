"""The Runs page's table, one row per run, and what /api shares of it::

    run         state    last_step  last_loss  lines  lines_per_min  since_last_s  open_incidents
    seed-cliff  finished      4499     0.9431   2230            6.0       38112.5               1
    live-run    live           812     0.5120    406           30.0           1.2               0
                                                                       ... alert_state  last_seen

A run's state comes from what its log says: ``run_end`` with status completed -> finished;
failed or interrupted -> failed (the run ended without completing); still running -> live, or
stalled when the stall alert rule would say so (``app/alerts/stall.py``: no line for longer
than the rule's budget, factor x the typical interval and at least ``min``, or its
checkpoint budget while a save is open). The budget is the rule's own ``StallJudge.budget``
over the rule in force, never a copy with numbers of its own.

``alert_state``: firing > pending > silenced > ok. A pending or firing alert that a silence
in force matches (``lifecycle.Silence.matches``, the engine's own glob rule) counts as
silenced, and so does a run that a silence in force names with its run glob.

Cost is bounded whatever a run's length (the page refreshes every 2 s): a run's newest line
is found by counting only the lines of its metrics files after their chart-tile watermark
(app/read/tiles.py; with no tiles rolled, a scan of the file_id column alone), its values
and pace come from one rowid range of ``TAIL_LINES`` ending at that line, the rowid bound
pushed into DuckDB's scan. The pace is measured over the lines of the newest attempt in the
last ``window_s`` seconds within that range: at more than ``TAIL_LINES`` lines in 300 s, over
the span the range covers. Only a run whose newest ``TAIL_LINES`` lines carry no loss (or
accuracy) at all reads further back for it, one column, row groups with none skipped.
"""

from __future__ import annotations

import fnmatch
import time

import pandas as pd

from ..alerts.lifecycle import Silence
from ..alerts.rules import Rule, default_rules
from ..alerts.stall import Quiet, StallJudge
from ..db import queries
from . import frame

COLUMNS = ["run", "state", "status", "last_step", "last_loss", "last_accuracy", "lines",
           "lines_per_min", "since_last_s", "open_incidents", "alert_state", "last_seen"]
ENDED = {"completed": "finished", "failed": "failed", "interrupted": "failed"}
ALERT_ORDER = ("firing", "pending", "silenced")
STATE_ORDER = {"live": 0, "stalled": 1, "failed": 2, "finished": 2}
TAIL_LINES = 8192  # rowids read per run: 300 s of pace at up to 27 lines a second
NEWEST = ("last_loss", "last_accuracy")


def stall_rule(rules: list[Rule] | None = None) -> Rule:
    """The stall rule in force (the first of type stall), else the built-in one."""
    found = [r for r in (rules or []) if r.type == "stall"]
    return (found or [r for r in default_rules() if r.type == "stall"])[0]


def runs_table(cursor, now: float | None = None, *, rules: list[Rule] | None = None,
               limit: int | None = None, search: str | None = None) -> pd.DataFrame:
    """Every run (at most ``limit``, names containing ``search``), live first, then the
    most recently written. ``rules``: the rules in force (the stall rule judges stalls)."""
    now = time.time() if now is None else now
    table = frame(cursor, "read/runs", {"search": search, "limit": limit})
    if table.empty:
        return pd.DataFrame(columns=COLUMNS)
    tails = newest_lines(cursor, list(table["run"]))
    table = table.join(tails, on="run")
    table["lines"] = table["lines"].fillna(0).astype(int)
    table["open_incidents"] = open_incidents(cursor, table)
    table["since_last_s"] = now - table["last_write"]
    table["state"] = states(cursor, table, now, stall_rule(rules))
    table["alert_state"] = alert_states(cursor, list(table["run"]), now)
    table["open_incidents"] = table["open_incidents"].astype(int)
    order = table["state"].map(STATE_ORDER)
    table = table.assign(_order=order).sort_values("_order", kind="stable")
    return table[COLUMNS].reset_index(drop=True)


def newest_lines(cursor, runs: list[str]) -> pd.DataFrame:
    """Per run: lines, and the step, loss, accuracy and pace of its newest lines (index: run;
    a run with no metrics lines is absent)."""
    files = frame(cursor, "read/runs_files", {"runs": runs})
    rows = []
    for run, group in files.groupby("run", sort=False):
        ends = [file_end(cursor, f) for f in group.itertuples()]
        lines = sum(n for n, _ in ends)
        newest = max(((last, f) for (_, last), f in zip(ends, group["file_id"], strict=True)
                      if last is not None), default=None)
        if newest is None:
            continue
        last, file = newest
        lo = max(0, last - TAIL_LINES + 1)
        tail = frame(cursor, "read/runs_tail", {"file": file, "lo": lo, "hi": last,
                                                "window_s": None}).iloc[0]
        row = {"run": run, "lines": lines, "last_step": tail["last_step"],
               "lines_per_min": 60.0 * (tail["n"] - 1) / tail["span_s"]
               if tail["span_s"] and tail["span_s"] > 0 else None}
        for column in NEWEST:
            row[column] = tail[column]
            if pd.isna(tail[column]) and lines > tail["lines"]:
                row[column] = older_value(cursor, column.removeprefix("last_"),
                                          [(file, lo), *((f, last + 1) for f in group["file_id"]
                                                         if f != file)])
        rows.append(row)
    return pd.DataFrame(rows, columns=["run", "lines", "last_step", "lines_per_min", *NEWEST]
                        ).set_index("run")


def file_end(cursor, file) -> tuple[int, int | None]:
    """Lines of one metrics file and the rowid of its newest line: its rolled lines plus a
    count of those after its tile watermark (with no tiles, a scan of file_id alone)."""
    (after, last), = queries.execute(cursor, "read/runs_file_end", {
        "file": file.file_id, "after": file.after}).fetchall()
    return int(file.rolled) + after, last


def older_value(cursor, column: str, places: list[tuple[int, int]]) -> float | None:
    """The newest non-NULL ``column`` below rowid ``before`` of each (file, before), or None
    (also when no log has the column yet)."""
    if column not in {f.name for f in queries.arrow_small(cursor, "read/tiles_columns").schema}:
        return None
    found = [queries.execute(cursor, "read/runs_last_value", {"file": file, "before": before},
                             {"column": column}).fetchall()[0] for file, before in places]
    return max(((line, value) for value, line in found if line is not None),
               default=(None, None))[1]


def open_incidents(cursor, table: pd.DataFrame) -> list[int]:
    known = table.dropna(subset=["last_step"])
    counts = dict(queries.execute(cursor, "read/runs_open_incidents", {
        "runs": list(known["run"]), "steps": [int(s) for s in known["last_step"]]}).fetchall())
    return [int(counts.get(run, 0)) for run in table["run"]]


def states(cursor, table: pd.DataFrame, now: float, rule: Rule) -> list[str]:
    quiet = [Quiet(r.run, r.status, r.last_write, r.last_step, None, None)
             for r in table.itertuples()
             if r.status == "running" and pd.notna(r.last_write)
             and now - r.last_write > min(rule.min_s, rule.checkpoint_budget_s)]
    judge = StallJudge()
    judge.prepare(cursor, quiet)
    stalled = {q.run for q in quiet if now - q.last_write > judge.budget(rule, q).seconds}
    return [ENDED.get(status, "stalled" if run in stalled else "live")
            for run, status in zip(table["run"], table["status"], strict=True)]


def alert_states(cursor, runs: list[str], now: float) -> list[str]:
    silences = [Silence(*row) for row in queries.execute(
        cursor, "alerts/engine_silences_active", {"now": now}).fetchall()]
    found: dict[str, set[str]] = {}
    for run, rule, state in queries.execute(cursor, "read/alert_states_active",
                                            {"runs": runs}).fetchall():
        muted = any(s.matches(rule, run) for s in silences)
        found.setdefault(run, set()).add("silenced" if muted else state)
    for run in runs:
        if any(fnmatch.fnmatchcase(run, s.run) for s in silences):
            found.setdefault(run, set()).add("silenced")
    return [next((s for s in ALERT_ORDER if s in found.get(run, ())), "ok") for run in runs]

