"""Diagnosis of whole runs (on demand) and live (as lines arrive), with the same detectors:
``detect.py`` over each run's metric lines, ``straggler.py`` over its rank lines.

    incidents = diagnose(cursor, watch)          # every run, whole
    live = LiveDiagnosis(db, watch); live.update()   # after each ingest tick
"""

from __future__ import annotations

import bisect
import itertools
import logging
import math
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..db import queries
from ..ingest.parse import records_table
from . import crash, frozen, marks, schedule, straggler
from .causes import (
    BucketRuns,
    RunContext,
    attribute,
    load_context,
    steps_per_epoch,
    window_context,
)
from .detect import BASELINE, TWO_WRITERS, Incident, RunDetector, Watch, is_grad_norm, severity_of
from .load import evaluated, frame_of, run_lines

log = logging.getLogger("cliffwatch.diagnose")
KIND_RANK = {"nonfinite": 0, frozen.KIND: 1, "divergence": 2, "cliff": 3, "spike": 4,
             "stall": 5, crash.KIND: 6, straggler.KIND: 7, TWO_WRITERS: 8}
# a crash after the spikes and stalls: those that explain it (the crash-resume run's checkpoint
# spikes) come first, and a run that only crashed has no other incident to rank against
SELF_EXPLAINED = (TWO_WRITERS, frozen.KIND, crash.KIND)  # each says its own cause
INCIDENT_SCHEMA = pa.schema([
    ("run", pa.string()), ("kind", pa.string()), ("metric", pa.string()),
    ("step", pa.int64()), ("end_step", pa.int64()), ("worst_step", pa.int64()),
    ("value", pa.float64()),
    ("baseline", pa.float64()), ("causes", pa.list_(pa.string())),
    ("evidence", pa.list_(pa.string()))])
GROWN = ("run", "kind", "metric", "step", "end_step", "worst_step", "value")  # the row's key
# and what diagnose/incident_grow writes (diagnose/incident_update: the causes too)
LINE_COLUMNS = ("line_id", "step", "attempt", "epoch", "time")  # of run_lines: causes read them
READ = object()  # LiveRun.attribute: read the run's steps per epoch from the database
MAX_LINES = 100_000  # line ids one query reads: a first tick over a long history goes in steps
SMALL_READ = 10_000  # line ids read through the DB-API (see LiveDiagnosis._new_lines)


def run_ids(cursor) -> list[str]:
    return [r[0] for r in queries.execute(cursor, "run_ids").fetchall()]


def collect(found: list[Incident], into: dict[tuple, Incident]) -> None:
    for incident in found:
        into[incident.key] = incident


def with_causes(cursor, run: str, incidents: list[Incident]) -> list[Incident]:
    if incidents:
        context = load_context(cursor, run)
        for incident in incidents:
            if incident.kind not in SELF_EXPLAINED:
                attribute(incident, context, incidents)
        frozen.explain(incidents)  # a NaN that left the loss frozen: that is its cause
    return incidents


def diagnose_run(cursor, run: str, watch: Watch) -> list[Incident]:
    detector, stuck = RunDetector(run, watch), frozen.FrozenDetector(run, watch)
    found: dict[tuple, Incident] = {}
    lines = run_lines(cursor, run, watch)
    collect(detector.feed(lines, evaluated(cursor, run)) + stuck.feed(lines), found)
    # a straggler comes with its causes: the metric lines' causes do not apply to rank lines
    return (with_causes(cursor, run, list(found.values())) + crash.failures(cursor, run)
            + straggler.diagnose_run(cursor, run))


def diagnose(cursor, watch: Watch, runs: list[str] | None = None) -> list[Incident]:
    """Whole-run diagnosis of the given runs (default: all), most severe first."""
    incidents = []
    for run in runs if runs is not None else run_ids(cursor):
        incidents += diagnose_run(cursor, run, watch)
    return sorted(incidents, key=severity)


def severity(incident: Incident | dict) -> tuple:
    """Sort key, most severe first: non-finite values, then divergences, cliffs, spikes,
    stalls, stragglers (a kind of a later version last), warnings (a gradient norm's spike)
    after them all; within a kind, the biggest departure from the baseline."""
    get = incident.get if isinstance(incident, dict) else incident.__getattribute__
    kind, value, baseline = get("kind"), _number(get("value")), _number(get("baseline"))
    warning = severity_of(kind, get("metric")) == "warning"
    if kind in ("stall", "spike", "divergence", straggler.KIND):
        size = value / baseline if baseline else math.inf
    elif kind == "cliff":
        size = baseline / max(value, 1e-12) if baseline else 0.0
    else:
        size = math.inf
    return (warning, KIND_RANK.get(kind, len(KIND_RANK)), -size, get("run"), get("step"))


def _number(value) -> float:
    """Values from JSON may be "NaN"/"Infinity" strings."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class LiveRun:
    """What live diagnosis keeps of one run: its detector, its incidents, and just enough of
    its recent lines to give a new incident the window its causes are judged from. A window's
    context (its lines and events) is read once and kept: an open incident is judged again on
    every tick it grows, and only the run-wide figures (typical bucket runs, steps per epoch)
    and a late event (see touched) can change its causes."""

    TAIL = 4 * BASELINE  # recent lines kept: a new incident's window starts in them

    def __init__(self, run: str, watch: Watch):
        self.run = run
        self.detector = RunDetector(run, watch)
        self.found: dict[tuple, Incident] = {}
        self.frozen = frozen.FrozenDetector(run, watch)  # its incidents say their own cause
        self.stuck: dict[tuple, Incident] = {}  # ... those it found
        # the stalls and gradient-norm spikes among found, in the same order: causes read them
        self.stalls: dict[tuple, Incident] = {}
        self.windows: dict[tuple, pd.DataFrame] = {}  # incident -> its lines (they never change)
        self.spans: dict[tuple, tuple[int, int]] = {}  # ... and their first and last step
        self.contexts: dict[tuple, RunContext] = {}  # ... and the context read for them
        self.buckets = BucketRuns()
        self.schedule = schedule.Schedule()
        self.recent: dict[str, np.ndarray] = {}  # the last TAIL lines, column by column
        self.last_line = -1

    def __getstate__(self) -> dict:
        """What a restarted server restores (marks.py): all but the contexts read for the
        windows, which are read again when next needed, as a server that never stopped would
        read them for an incident a new event touches."""
        return {**self.__dict__, "contexts": {}}

    def feed(self, table: pa.Table, watch: Watch, evaluations=None) -> list[Incident]:
        """Judge new lines (a run_lines table); returns the incidents found or grown, each
        remembering its window. ``evaluations``: load.evaluated's lookup (RunDetector.feed)."""
        frame = frame_of(table, watch)
        self.last_line = int(frame["line_id"].iat[-1])
        runs, owners = self.buckets.feed(table["buckets"].combine_chunks())
        lines = {name: table[name].to_numpy(zero_copy_only=False) for name in LINE_COLUMNS}
        lines["bucket_run"], lines["run_bucket"] = runs, owners
        lines.update(self.schedule.feed(table))
        if self.recent:
            lines = {name: np.concatenate([self.recent[name], lines[name]]) for name in lines}
        changed = {i.key: i for i in self.detector.feed(frame, evaluations)}
        for key, incident in changed.items():
            if key not in self.windows:
                self.windows[key] = window = _window(lines, incident)
                if window is not None:
                    self.spans[key] = (int(window["step"].min()), int(window["step"].max()))
            if incident.kind == "stall" or is_grad_norm(incident.metric):
                self.stalls[key] = incident
        self.recent = {name: column[-self.TAIL:] for name, column in lines.items()}
        self.found.update(changed)
        stuck = self.frozen.feed(frame)
        self.stuck.update((i.key, i) for i in stuck)
        return list(changed.values()) + stuck

    def explained(self) -> list[Incident]:
        """The non-finite incidents whose first cause became a frozen loss (frozen.explain),
        judged again after their causes were (attribute writes them anew)."""
        if not self.stuck:
            return []
        return frozen.explain([*self.found.values(), *self.stuck.values()])

    def attribute(self, cursor, incidents: list[Incident], per_epoch=READ,
                  fresh: set[tuple] = frozenset()) -> None:
        """Causes of the given incidents only, each from its own window; an incident whose
        window was not at hand (a run read before this process started, say) reads the run.
        ``per_epoch``: the run's steps per epoch (default: read from run.json's row);
        ``fresh``: incidents whose window holds a newly stored event (their events are read
        again)."""
        stalls = list(self.stalls.values())
        typical = self.buckets.typical()
        if per_epoch is READ:
            per_epoch = steps_per_epoch(cursor, self.run)
        whole = None
        for incident in incidents:
            window = self.windows.get(incident.key)
            if incident.kind in SELF_EXPLAINED:
                continue
            if window is None:
                whole = whole or load_context(cursor, self.run)
                attribute(incident, whole, stalls)
                continue
            context = self.contexts.get(incident.key)
            if context is None or incident.key in fresh:
                # the evaluation rows explain a stall only (causes.ONLY): no query for others
                context = window_context(cursor, self.run, window, self.schedule.name,
                                         incident.kind == "stall")
                self.contexts[incident.key] = context
            attribute(incident, replace(context, steps_per_epoch=per_epoch,
                                        typical_run=typical), stalls)

    def recurring(self, new: list[Incident]) -> list[Incident]:
        """The two stalls before each new stall: whether a stall recurs every N steps
        (causes._periodic) depends on the two after it."""
        if not any(i.kind == "stall" for i in new):
            return []
        stalls = sorted((i for i in self.stalls.values() if i.kind == "stall"),
                        key=lambda i: i.step)
        at = {i.key: n for n, i in enumerate(stalls)}
        return [stalls[n] for i in new if i.kind == "stall"
                for n in range(max(0, at[i.key] - 2), at[i.key])]

    def touched(self, steps: list[int]) -> list[Incident]:
        """Incidents whose window holds one of ``steps``, those of the events stored since the
        last tick: an event read after the lines it explains (a checkpoint_end after the stall
        it caused) still counts. An incident without a window at hand counts too."""
        if not steps:
            return []
        steps = sorted(steps)  # a first tick can bring every event of a long run
        return [i for key, i in self.found.items() if _holds(self.spans.get(key), steps)]


def _holds(span: tuple[int, int] | None, steps: list[int]) -> bool:
    """Whether a window's span of steps holds one of the sorted ``steps`` (no window: assume
    so)."""
    if span is None:
        return True
    lo, hi = span
    first = bisect.bisect_left(steps, lo)
    return first < len(steps) and steps[first] <= hi


def _window(lines: dict[str, np.ndarray], incident: Incident) -> pd.DataFrame | None:
    """The lines from where ``incident``'s cause search starts through its first line, or
    None when they are no longer at hand."""
    ids = lines["line_id"]
    lo = np.searchsorted(ids, incident.from_line_id)
    hi = np.searchsorted(ids, incident.line_id)
    if lo >= len(ids) or ids[lo] != incident.from_line_id or hi >= len(ids):
        return None
    return pd.DataFrame({name: column[lo:hi + 1].copy() for name, column in lines.items()})


class LiveDiagnosis:
    """Feeds each run's new lines to its detector and stores what it finds in `incidents`.
    A tick costs what was stored since the last one, whatever the number of runs or their
    length: one query says whether any metric line, event or rank line was stored (a tick
    after which nothing was ingested stops there, having read no row); then one query for
    every run's new lines, one for those runs and the new events, one for every run's new
    rank lines, and one write per incident found or grown (their causes judged from their
    own windows).

    With ``resume``, it starts from the marks a server stored (marks.py): a restarted server
    reads only what was stored after them, and a run's state only when the run has something
    new; ``save()`` stores them."""

    def __init__(self, db, watch: Watch, resume: bool = False):
        self.db, self.watch = db, watch
        self.runs: dict[str, LiveRun] = {}
        self.stragglers: dict[str, straggler.Stragglers] = {}
        self.last_line = -1  # metric_rows' rowid (line_id) judged so far, every run's
        self.last_rank_line = -1  # ranks_all's rowid judged so far, every run's
        self.last_event = -1  # events' rowid judged so far, every run's
        self.stored: dict[tuple, tuple] = {}  # incident -> the causes this process stored
        self.dirty: set[str] = set()  # runs whose state changed since the marks were saved
        self.saved_at = -math.inf  # time.monotonic() of the last save
        self.stopping = lambda: False  # the worker's: a long first pass ends between steps
        self.looked: set[str] | None = None  # runs whose stored state was read (None: the
        # marks were not read, so no state is either)
        if resume:
            self._resume()

    def _resume(self) -> None:
        found = marks.load(self.db.cursor(), self.watch)
        if found is not None:
            self.last_line, self.last_event, self.last_rank_line = found
            self.looked = set()

    def _restore(self, cursor, runs) -> None:
        """Read the stored states of those of ``runs`` not read yet (one query)."""
        if self.looked is None:
            return
        wanted = sorted(set(runs) - self.looked)
        if not wanted:
            return
        for run, state in marks.restore(cursor, wanted).items():
            if state["lines"] is not None:
                self.runs[run] = state["lines"]
            if state["ranks"] is not None:
                self.stragglers[run] = state["ranks"]
        self.looked.update(wanted)

    def save(self, force: bool = False) -> bool:
        """Store the marks and the changed runs' states (at most every SAVE_S seconds unless
        ``force``); whether it did."""
        if not self.dirty or (not force and time.monotonic() - self.saved_at < marks.SAVE_S):
            return False
        states = {run: {"lines": self.runs.get(run), "ranks": self.stragglers.get(run)}
                  for run in self.dirty}
        marks.save(self.db, self.watch, (self.last_line, self.last_event,
                                         self.last_rank_line), states)
        self.dirty.clear()
        self.saved_at = time.monotonic()
        return True

    def update(self) -> int:
        """Judge every run's new lines; returns incidents stored or changed."""
        cursor = self.db.cursor()
        line, event, rank = queries.execute(cursor, "diagnose/changes", {
            "line": self.last_line, "event": self.last_event,
            "rank": self.last_rank_line}).fetchall()[0]
        changed = 0
        if line is not None or event is not None:
            changed += self._lines(cursor, self.last_line if line is None else line,
                                   self.last_event if event is None else event)
        if rank is not None:
            changed += self._stragglers(cursor, rank)
        return changed

    def _lines(self, cursor, upto: int, upto_event: int) -> int:
        """Judge the lines up to line id ``upto`` and the events up to ``upto_event``, at most
        MAX_LINES line ids a query (a first tick over a long history goes in steps)."""
        changed = 0
        while True:
            stop = min(upto, self.last_line + MAX_LINES)
            table = self._new_lines(cursor, stop)
            changed += self._judge(cursor, table, upto_event)
            self.last_line = stop  # only now: a failed tick reads the same lines again
            if stop >= upto or self.stopping():  # the server stops: the next start reads on
                return changed

    def _new_lines(self, cursor, stop: int) -> pa.Table | None:
        if stop <= self.last_line:
            return None
        # a first tick's long read through the relational API (no extra copy of the rows), a
        # tick's few lines through the DB-API (which plans the query once, not twice)
        read = queries.arrow if stop - self.last_line > SMALL_READ else queries.arrow_small
        return read(cursor, "diagnose/new_lines", {"after": self.last_line, "upto": stop})

    def _judge(self, cursor, table: pa.Table | None, upto_event: int) -> int:
        """Feed each run's lines of ``table`` (diagnose/new_lines) to its detector, judge again
        the incidents the new events touch, and store what changed."""
        lines = _by_run(table)
        runs, events = self._runs(cursor, list(lines), upto_event)
        self._restore(cursor, runs.keys() | lines.keys())
        changed = 0
        for run in sorted(runs.keys() | lines.keys()):
            live = self.runs.get(run)
            if live is None and run not in lines:
                continue  # events of a run with no lines yet: no incident to judge again
            live = live or self.runs.setdefault(run, LiveRun(run, self.watch))
            self.dirty.add(run)
            table = _unread(lines.get(run), live.last_line)
            new = (live.feed(table, self.watch, evaluated(cursor, run))
                   if table is not None else [])
            keys = {i.key for i in new}
            touched = live.touched(events.get(run, []))  # grown ones too: their events changed
            again = [i for i in touched + live.recurring(new) if i.key not in keys]
            again = list({i.key: i for i in again}.values())
            if new or again:
                live.attribute(cursor, new + again, runs.get(run), {i.key for i in touched})
                judged = {i.key: i for i in new + again + live.explained()}
                changed += self._store(cursor, list(judged.values()))
        changed += self._crashes(cursor, upto_event)
        self.last_event = upto_event  # only now: a failed tick reads the same events again
        return changed

    def _crashes(self, cursor, upto_event: int) -> int:
        """The failed run_end events stored since the last tick, each an incident (one query,
        only on a tick that stored events)."""
        if upto_event <= self.last_event:
            return 0
        found = crash.failures(cursor, None, self.last_event, upto_event)
        return self._store(cursor, found) if found else 0

    def _stragglers(self, cursor, upto: int) -> int:
        """Feed every run's new rank lines to its straggler detector (one query for all runs:
        most runs have no rank files) and store what it found, grew or ended."""
        params = {"run": None, "after": self.last_rank_line, "upto": upto}
        read = queries.arrow if self.last_rank_line < 0 else queries.arrow_small
        table = read(cursor, "diagnose/rank_lines", params)
        found = []
        groups = list(straggler.by_run(table))
        self._restore(cursor, [run for run, _ in groups])
        for run, lines in groups:
            detector = self.stragglers.setdefault(run, straggler.Stragglers(run))
            self.dirty.add(run)
            found += detector.feed(lines)
        self.last_rank_line = upto  # the detectors have the lines: never feed them twice
        return self._store(cursor, found) if found else 0

    def _runs(self, cursor, names: list[str], upto_event: int) -> tuple[dict, dict]:
        """The runs named and those with events stored since the last tick, each with its
        steps per epoch, and the steps of those events by run (diagnose/runs)."""
        runs: dict[str, int | None] = {}
        events: dict[str, list[int]] = {}
        rows = queries.execute(cursor, "diagnose/runs", {
            "runs": names, "after": self.last_event, "upto": upto_event}).fetchall()
        for run, per_epoch, event_id, step in rows:
            if event_id is None:
                runs[run] = per_epoch
            elif step is not None:
                events.setdefault(run, []).append(step)
        return runs, events

    def _store(self, cursor, incidents: list[Incident]) -> int:
        """Incidents stored before are updated in place; the others (and any whose row is
        gone) are upserted together."""
        fresh = [i for i in incidents if i.key not in self.stored or not self._update(cursor, i)]
        if fresh:
            rows = [{f: getattr(i, f) for f in INCIDENT_SCHEMA.names} for i in fresh]
            cursor.register("chunk", records_table(rows, INCIDENT_SCHEMA))
            try:
                queries.execute(cursor, "ingest/incident_upsert")
            finally:
                cursor.unregister("chunk")
        self.stored.update((i.key, _judged(i)) for i in incidents)
        return len(incidents)

    def _update(self, cursor, incident: Incident) -> bool:
        """Whether the incident's row was there to update; its causes are written only when
        they differ from those this process stored last."""
        if self.stored[incident.key] == _judged(incident):
            name, fields = "diagnose/incident_grow", GROWN
        else:
            name, fields = "diagnose/incident_update", (*GROWN, "causes", "evidence")
        params = {f: getattr(incident, f) for f in fields}
        return queries.execute(cursor, name, params).fetchone()[0] > 0


def _by_run(table: pa.Table | None) -> dict[str, pa.Table]:
    """Each run's lines of a table sorted by run (diagnose/new_lines)."""
    if table is None or not table.num_rows:
        return {}
    runs, start, found = table["run"].to_pylist(), 0, {}
    for run, group in itertools.groupby(runs):
        size = sum(1 for _ in group)
        found[run] = table.slice(start, size)
        start += size
    return found


def _unread(table: pa.Table | None, last_line: int) -> pa.Table | None:
    """The lines of ``table`` after ``last_line`` (all of them, but after a failed tick)."""
    if table is None or table["line_id"][0].as_py() > last_line:
        return table
    table = table.filter(pc.greater(table["line_id"], last_line))
    return table if table.num_rows else None


def _judged(incident: Incident) -> tuple:
    return tuple(incident.causes), tuple(incident.evidence)
