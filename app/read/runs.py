"""The Runs page's table, a page of runs at a time, one row per run, and /api/runs's page::

    run         state    last_step  last_loss  lines  lines_per_min  since_last_s  incidents
    seed-cliff  finished      4499     0.9431   2230            6.0       38112.5          5
    live-run    live           812     0.5120    406           30.0           1.2          1
                                                      ... open_incidents  alert_state  last_seen

A page (``Ask``: a name search or glob, live/finished, limit and offset) is listed from the
runs and files tables alone, in one order (queries/read/runs.sql: live first, then the most
recently written, then by name) with how many runs match; only the page's runs are then
read, so a folder of 10,000 runs costs a page of 25 or 50 of them (issue 12), and a page
refreshed while its runs write nothing reads none of their lines again (``Tails``).

A run's state comes from what its log says: ``run_end`` with status completed -> finished;
failed -> failed; interrupted -> interrupted (stopped on purpose: Ctrl-C, SIGTERM, a scheduler's
preemption, which a person must not read as a crash); still running -> live, or
stalled when the stall alert rule would say so (``app/alerts/stall.py``: no line for longer
than the rule's budget, factor x the typical interval and at least ``min``, or its
checkpoint budget while a save is open). The budget is the rule's own ``StallJudge.budget``
over the rule in force, never a copy with numbers of its own. Other trainers write no
``run_end``: such a run is finished once its log marks the end of training (queries'
``run_status``: Hugging Face's end-of-training entry, LLaMA-Factory's closing line), and idle
once its log has not grown for ``idle_after`` seconds without saying so (a crash, a kill, a
run that ended without a word): no longer live, never live for ever. A run past its stall
budget that has written nothing since the rules first met it, when it was already history
or silent past its budget, is stopped: it finished or stopped before cliffwatch started
(``stall.before_watch``: a copied finished log, a TensorBoard file from last week), neither
stalled nor merely idle.

``alert_state``: firing > pending > silenced > ok. A pending or firing alert that a silence
in force matches (``lifecycle.Silence.matches``, the engine's own glob rule) counts as
silenced, and so does a run that a silence in force names with its run glob.

Cost is bounded whatever a run's length (the page refreshes every 2 s): a run's newest line
is found by counting only the lines of its metrics files after their chart-tile watermark
(app/read/tiles.py; with no tiles rolled, a scan of the file_id column alone), its values
and pace come from one rowid range of ``TAIL_LINES`` ending at that line, the rowid bound
pushed into DuckDB's scan. The pace is measured over the lines of the newest attempt in the
last ``window_s`` seconds within that range: at more than ``TAIL_LINES`` lines in 300 s, over
the span the range covers; the 300 s end now, not at the newest line (app/read/pace.py:
a run that stops writing shows a pace that falls to 0). Only a run whose newest
``TAIL_LINES`` lines carry no loss (or accuracy) at all reads further back for it, one
column, row groups with none skipped. A run that logs no ``loss`` at all shows its own metric
of that kind as Compare draws it (``Watch.stand_in``: a TensorBoard run's ``train/loss``), and
``stood_in`` names it (the page says so under the table).
"""

from __future__ import annotations

import fnmatch
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..alerts.fields import glob_problem
from ..alerts.lifecycle import Silence
from ..alerts.rules import Rule, default_rules
from ..alerts.stall import Quiet, StallJudge, before_watch
from ..db import queries
from ..db.readonly import jsonable
from ..diagnose.rules import Watch
from ..errors import CliffwatchError
from . import frame, pace

COLUMNS = ["run", "state", "status", "last_step", "last_loss", "last_accuracy", "lines",
           "lines_per_min", "since_last_s", "incidents", "open_incidents", "alert_state",
           "last_seen", "stood_in"]
ENDED = {"completed": "finished", "failed": "failed", "interrupted": "interrupted"}
ALERT_ORDER = ("firing", "pending", "silenced")
STATE_ORDER = {"live": 0, "stalled": 1, "idle": 2, "stopped": 2, "failed": 2,
               "interrupted": 2, "finished": 2}
IDLE_AFTER = 300.0  # the idle_after setting's default (app/settings.py)
TAIL_LINES = 8192  # rowids read per run: 300 s of pace at up to 27 lines a second
NEWEST = ("last_loss", "last_accuracy")
PAGE = 50  # runs /api/runs answers unless asked otherwise (the Runs page shows 25)
MAX_PAGE = 1000  # a page's runs are each read (their newest lines): a bounded page
STATUSES = {"all": None, "live": "live", "finished": "finished"}
LISTED = ["run", "status", "first_seen", "last_seen", "last_write", "log_ended"]
GLOB = set("*?[")  # a q holding one of these is a glob, else a part of the name


def stall_rule(rules: list[Rule] | None = None) -> Rule:
    """The stall rule in force (the first of type stall), else the built-in one."""
    found = [r for r in (rules or []) if r.type == "stall"]
    return (found or [r for r in default_rules() if r.type == "stall"])[0]


@dataclass(frozen=True)
class Ask:
    """Which page of runs: ``q`` a part of the name (any case), or a glob when it holds
    ``*``, ``?`` or ``[`` (``sweep3-*``); ``status`` live, finished or None (both)."""
    q: str | None = None
    status: str | None = None
    limit: int | None = PAGE
    offset: int = 0

    @classmethod
    def parse(cls, params: Mapping, page: int = PAGE) -> Ask:
        """From ``?limit=50&offset=0&q=sweep3&status=live`` (an API request, a page's URL;
        ``page`` runs when it gives no limit); a bad value is a CliffwatchError that says what
        to send."""
        q = (params.get("q") or "").strip() or None
        if q is not None and GLOB.intersection(q) and glob_problem(q):
            raise CliffwatchError(f"q {q!r} is not a valid glob: {glob_problem(q)}")
        status = (params.get("status") or "all").strip().lower()
        if status not in STATUSES:
            raise CliffwatchError(f"status must be one of {', '.join(STATUSES)}, not "
                                  f"{status!r}")
        return cls(q, STATUSES[status], whole(params, "limit", page, 1, MAX_PAGE),
                   whole(params, "offset", 0, 0, None))

    def bound(self, now: float | None = None, idle_after: float = IDLE_AFTER) -> dict:
        """read/runs.sql's parameters: the name filter as a glob or as a part of the name;
        ``now`` and ``idle_after`` say which runs of other trainers are idle (None: none)."""
        glob = self.q if self.q and GLOB.intersection(self.q) else None
        return {"search": None if glob else self.q, "glob": glob, "status": self.status,
                "limit": self.limit, "offset": self.offset, "now": now,
                "idle_after": idle_after}


def whole(params: Mapping, name: str, default: int, low: int, high: int | None) -> int:
    """A whole-number parameter within [low, high] (high None: no cap), else its default."""
    text = str(params.get(name) or "").strip()
    if not text:
        return default
    if text.isdigit() and low <= int(text) and (high is None or int(text) <= high):
        return int(text)
    if high is None:
        raise CliffwatchError(f"{name} must be a whole number, {low} or more, not {text!r} "
                              f"(e.g. ?{name}={PAGE})")
    raise CliffwatchError(f"{name} must be a whole number from {low} to {high}, not {text!r}; "
                          f"for more runs, page on with offset (e.g. ?{name}={high}&offset="
                          f"{high})")


def next_offset(ask: Ask, shown: int, total: int) -> int | None:
    """Where the next page starts, or None on the last one."""
    end = ask.offset + shown
    return end if shown and end < total else None


@dataclass
class Page:
    """One page of runs and how many match (``total``): runs offset .. offset + len(runs)."""
    table: pd.DataFrame
    total: int
    ask: Ask

    @property
    def next(self) -> int | None:
        return next_offset(self.ask, len(self.table), self.total)


def listed(cursor, ask: Ask, now: float | None = None,
           idle_after: float = IDLE_AFTER) -> tuple[pd.DataFrame, int]:
    """The page's runs (run, status, first_seen, last_seen, last_write, log_ended) and how
    many match: one read of the runs and files tables, no metrics line."""
    rows, total = listed_rows(cursor, ask, now, idle_after)
    return pd.DataFrame(rows, columns=LISTED), total


def listed_rows(cursor, ask: Ask, now: float | None = None,
                idle_after: float = IDLE_AFTER) -> tuple[list[dict], int]:
    """listed() as a list of dicts (what the API answers with)."""
    found = queries.execute(cursor, "read/runs", ask.bound(now, idle_after))
    names = [d[0] for d in found.description]
    rows = [dict(zip(names, row, strict=True)) for row in found.fetchall()]
    total = [row.pop("total") for row in rows]  # the same on every row
    return [r for r in rows if r["run"] is not None], total[0] if total else 0


def api_page(cursor, ask: Ask, now: float | None = None,
             idle_after: float = IDLE_AFTER) -> dict:
    """What ``GET /api/runs`` answers: one page of runs with their figures, and how to get
    the next one::

        {"runs": [{"run": "sweep3-lr0.1", "status": "running", "first_seen": "...",
                   "last_seen": "...", "last_write": 1796032800.0, "log_ended": null,
                   "lines": 2230,
                   "last_step": 4499, "attempts": 1, "last_elapsed_s": 22554.2,
                   "errors": 0}, ...],
         "total": 10000, "limit": 50, "offset": 0, "next": 50}

    Two reads: the page (runs and files tables) and its runs' figures (read/runs_stats: the
    metrics lines of those runs only). ``log_ended``: null for a run in our own format
    (run_end says how it ended), else whether its log marks the end of training."""
    rows, total = listed_rows(cursor, ask, time.time() if now is None else now, idle_after)
    if rows:
        found = queries.execute(cursor, "read/runs_stats", {"runs": [r["run"] for r in rows]})
        names = [d[0] for d in found.description]
        stats = {row[0]: dict(zip(names[1:], row[1:], strict=True)) for row in found.fetchall()}
        rows = [{**r, **stats.get(r["run"], {})} for r in rows]
    return {"runs": [{k: jsonable(v) for k, v in r.items()} for r in rows], "total": total,
            "limit": ask.limit, "offset": ask.offset,
            "next": next_offset(ask, len(rows), total)}


def page(cursor, ask: Ask = Ask(), now: float | None = None, *,
         rules: list[Rule] | None = None, tails: Tails | None = None,
         idle_after: float = IDLE_AFTER, watch: Watch | None = None) -> Page:
    """One page of the Runs table (live first, then the most recently written, then by name)
    and how many runs match. ``rules``: the rules in force (the stall rule judges stalls);
    ``tails``: newest lines read before, kept across calls (the page refreshes every 2 s);
    ``idle_after``: seconds without growth after which another trainer's run is idle;
    ``watch``: the server's loss and accuracy metrics (a run's stand-ins, Watch.stand_in)."""
    now = time.time() if now is None else now
    table, total = listed(cursor, ask, now, idle_after)
    return Page(describe(cursor, table, now, rules, tails, idle_after, watch), total, ask)


def exists(cursor, run: str) -> bool:
    """Whether a run of exactly this name is known."""
    return bool(queries.execute(cursor, "read/runs_exists", {"run": run}).fetchall()[0][0])


def runs_table(cursor, now: float | None = None, *, rules: list[Rule] | None = None,
               limit: int | None = None, search: str | None = None) -> pd.DataFrame:
    """Every run (at most ``limit``, names containing ``search``), as page() orders them."""
    return page(cursor, Ask(search, None, limit, 0), now, rules=rules).table


def describe(cursor, table: pd.DataFrame, now: float | None, rules: list[Rule] | None,
             tails: Tails | None = None, idle_after: float = IDLE_AFTER,
             watch: Watch | None = None) -> pd.DataFrame:
    """The Runs table's columns for the runs listed: each run's newest lines, bounded reads.
    ``watch``: which metrics are losses and accuracies (the server's settings; Watch())."""
    now = time.time() if now is None else now
    if table.empty:
        return pd.DataFrame(columns=COLUMNS)
    table = table.join(newest_lines(cursor, list(table["run"]), tails, watch or Watch()),
                       on="run")
    table["lines"] = table["lines"].fillna(0).astype(int)
    table["incidents"], table["open_incidents"] = incident_counts(cursor, table)
    table["since_last_s"] = now - table["last_write"]
    table["lines_per_min"] = pace.falling(cursor, table)  # over the 300 s ending now
    table["state"] = states(cursor, table, now, stall_rule(rules), idle_after)
    table["alert_state"] = alert_states(cursor, list(table["run"]), now)
    table[["incidents", "open_incidents"]] = table[["incidents", "open_incidents"]].astype(int)
    order = table["state"].map(STATE_ORDER)
    table = table.assign(_order=order).sort_values("_order", kind="stable")
    return table[COLUMNS].reset_index(drop=True)


class Tails:
    """Each run's newest-lines row, kept while its metrics files stay as they were: a page
    refreshed every 2 s over runs that wrote nothing reads none of their lines again. Holds
    at most ``size`` runs (the least recently used go first); pages of several browser tabs
    share one (each in its own thread), hence the lock."""

    def __init__(self, size: int = 4096):
        self.size, self.rows, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, run: str, key: tuple) -> tuple[bool, dict | None]:
        """(True, row) when the row was read with the files as ``key`` says, else (False,
        None)."""
        with self.lock:
            found = self.rows.get(run)
            if found is None or found[0] != key:
                return False, None
            self.rows.move_to_end(run)
            return True, found[1]

    def put(self, run: str, key: tuple, row: dict | None) -> None:
        with self.lock:
            self.rows[run] = (key, row)
            self.rows.move_to_end(run)
            while len(self.rows) > self.size:
                self.rows.popitem(last=False)


def newest_lines(cursor, runs: list[str], tails: Tails | None = None,
                 watch: Watch | None = None) -> pd.DataFrame:
    """Per run: lines, and the step, loss, accuracy and pace of its newest lines (index: run;
    a run with no metrics lines is absent). ``tails``: rows read before, reused for each run
    whose metrics files ingest has not committed since (read/runs_files says)."""
    files = frame(cursor, "read/runs_files", {"runs": runs})
    rows = []
    for run, group in files.groupby("run", sort=False):
        key = tuple(group[["file_id", "attempt", "bytes", "consumed", "updated_at"]]
                    .itertuples(index=False, name=None))
        known, row = tails.get(run, key) if tails is not None else (False, None)
        if not known:
            row = newest_line(cursor, run, group, watch or Watch())
            if tails is not None:
                tails.put(run, key, row)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows, columns=["run", "lines", "last_step", "lines_per_min", "tail",
                                       *NEWEST, "stood_in"]).set_index("run")


def newest_line(cursor, run: str, group: pd.DataFrame, watch: Watch) -> dict | None:
    """newest_lines()'s row for one run (``group``: its metrics files), or None (no lines)."""
    ends = [file_end(cursor, f) for f in group.itertuples()]
    lines = sum(n for n, _ in ends)
    newest = max(((last, f) for (_, last), f in zip(ends, group["file_id"], strict=True)
                  if last is not None), default=None)
    if newest is None:
        return None
    last, file = newest
    lo = max(0, last - TAIL_LINES + 1)
    tail = frame(cursor, "read/runs_tail", {"file": file, "lo": lo, "hi": last,
                                            "window_s": None}).iloc[0]
    row = {"run": run, "lines": lines, "last_step": tail["last_step"],
           "lines_per_min": 60.0 * (tail["n"] - 1) / tail["span_s"]
           if tail["span_s"] and tail["span_s"] > 0 else None,
           "tail": (file, lo, last)}  # where pace.falling reads again once the run is quiet
    row.update({column: tail[column] for column in NEWEST})
    if all(pd.notna(tail[column]) for column in NEWEST):
        row["stood_in"] = None
        return row
    columns = _columns(cursor)  # once per run read: every older value asks which exist
    if lines > tail["lines"]:
        for column in NEWEST:
            if pd.isna(row[column]):
                row[column] = older_value(cursor, column.removeprefix("last_"), columns,
                                          [(file, lo), *((f, last + 1) for f in
                                                         group["file_id"] if f != file)])
    row["stood_in"] = stand_ins(cursor, row, watch, columns,
                                [(f, last + 1) for f in group["file_id"]])
    return row


def stand_ins(cursor, row: dict, watch: Watch, columns: set[str],
              places: list[tuple[int, int]]) -> str | None:
    """Fill the loss or accuracy of a run that logs none under that name (its value is still
    missing after older_value) with the newest value of its own of that kind (Watch.stand_in:
    a TensorBoard run's train/loss); what stood in ("loss: train/loss"), else None. The
    candidates are the database's ``columns`` in stand_in's order, tried until one holds a value
    of this run's: a run with no accuracy-like metric reads nothing where no log has one."""
    said = []
    for column in NEWEST:
        if not pd.isna(row[column]):
            continue
        metric = column.removeprefix("last_")
        for name in watch.stand_ins(metric, sorted(columns - {metric})):
            value = older_value(cursor, name, columns, places)
            if value is not None:
                row[column] = value
                said.append(f"{metric}: {name}")
                break
    return ", ".join(said) or None


def file_end(cursor, file) -> tuple[int, int | None]:
    """Lines of one metrics file and the rowid of its newest line: its rolled lines plus a
    count of those after its tile watermark (with no tiles, a scan of file_id alone)."""
    (after, last), = queries.execute(cursor, "read/runs_file_end", {
        "file": file.file_id, "after": file.after}).fetchall()
    return int(file.rolled) + after, last


def older_value(cursor, column: str, columns: set[str],
                places: list[tuple[int, int]]) -> float | None:
    """The newest non-NULL ``column`` below rowid ``before`` of each (file, before), or None
    (also when no log has the column yet: it is not among the metrics lines' ``columns``)."""
    if column not in columns:
        return None
    found = [queries.execute(cursor, "read/runs_last_value", {"file": file, "before": before},
                             {"column": column}).fetchall()[0] for file, before in places]
    return max(((line, value) for value, line in found if line is not None),
               default=(None, None))[1]


def _columns(cursor) -> set[str]:
    """The metrics lines' columns, every log's."""
    return {f.name for f in queries.arrow_small(cursor, "read/tiles_columns").schema}


def incident_counts(cursor, table: pd.DataFrame) -> tuple[list[int], list[int]]:
    """Each run's incidents, and how many of them are open (may still grow)."""
    known = table.dropna(subset=["last_step"])
    counts = {run: (every, open_) for run, every, open_ in queries.execute(
        cursor, "read/runs_incidents", {"runs": list(known["run"]),
                                        "steps": [int(s) for s in known["last_step"]]})
              .fetchall()}
    found = [counts.get(run, (0, 0)) for run in table["run"]]
    return [int(every) for every, _ in found], [int(open_) for _, open_ in found]


def states(cursor, table: pd.DataFrame, now: float, rule: Rule,
           idle_after: float = IDLE_AFTER) -> list[str]:
    idle = {r.run for r in table.itertuples() if r.status == "running"
            and pd.notna(r.log_ended) and pd.notna(r.last_write)
            and now - r.last_write > idle_after}
    met = {run: (first, step) for run, first, step in queries.execute(
        cursor, "read/runs_first_met", {"runs": list(table["run"])}).fetchall()}
    quiet = [Quiet(r.run, r.status, r.last_write, r.last_step, *met.get(r.run, (None, None)))
             for r in table.itertuples()
             if r.status == "running" and pd.notna(r.last_write)
             and now - r.last_write > min(rule.min_s, rule.checkpoint_budget_s)]
    judge = StallJudge()
    judge.prepare(cursor, quiet)
    past = {q.run: q for q in quiet if now - q.last_write > judge.budget(rule, q).seconds}
    # silent since before cliffwatch watched it: no stall, and more than idle says
    stopped = {run for run, q in past.items() if before_watch(q, judge.budget(rule, q))}
    return [ENDED.get(status, "stopped" if run in stopped else "idle" if run in idle
                      else "stalled" if run in past else "live")
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

