"""Diagnosis of whole runs (on demand) and live (as lines arrive), with the same detector.

    incidents = diagnose(cursor, watch)          # every run, whole
    live = LiveDiagnosis(db, watch); live.update()   # after each ingest tick
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pandas as pd
import pyarrow as pa

from app.db import queries
from app.diagnose.causes import BucketRuns, attribute, load_context, window_context
from app.diagnose.detect import BASELINE, Incident, RunDetector, Watch
from app.diagnose.load import frame_of, run_lines
from app.ingest.parse import records_table

log = logging.getLogger("cliffwatch.diagnose")
KIND_RANK = {"nonfinite": 0, "cliff": 1, "spike": 2, "stall": 3}
INCIDENT_SCHEMA = pa.schema([
    ("run", pa.string()), ("kind", pa.string()), ("metric", pa.string()),
    ("step", pa.int64()), ("end_step", pa.int64()), ("worst_step", pa.int64()),
    ("value", pa.float64()),
    ("baseline", pa.float64()), ("causes", pa.list_(pa.string())),
    ("evidence", pa.list_(pa.string()))])


def run_ids(cursor) -> list[str]:
    return [r[0] for r in queries.execute(cursor, "run_ids").fetchall()]


def collect(found: list[Incident], into: dict[tuple, Incident]) -> None:
    for incident in found:
        into[incident.key] = incident


def with_causes(cursor, run: str, incidents: list[Incident]) -> list[Incident]:
    if incidents:
        context = load_context(cursor, run)
        stalls = [i for i in incidents if i.kind == "stall"]
        for incident in incidents:
            attribute(incident, context, stalls)
    return incidents


def diagnose_run(cursor, run: str, watch: Watch) -> list[Incident]:
    detector = RunDetector(run, watch)
    found: dict[tuple, Incident] = {}
    collect(detector.feed(run_lines(cursor, run, watch)), found)
    return with_causes(cursor, run, list(found.values()))


def diagnose(cursor, watch: Watch, runs: list[str] | None = None) -> list[Incident]:
    """Whole-run diagnosis of the given runs (default: all), most severe first."""
    incidents = []
    for run in runs if runs is not None else run_ids(cursor):
        incidents += diagnose_run(cursor, run, watch)
    return sorted(incidents, key=severity)


def severity(incident: Incident | dict) -> tuple:
    """Sort key, most severe first: non-finite values, then cliffs, spikes, stalls; within a
    kind, the biggest departure from the baseline."""
    get = incident.get if isinstance(incident, dict) else incident.__getattribute__
    kind, value, baseline = get("kind"), _number(get("value")), _number(get("baseline"))
    if kind in ("stall", "spike"):
        size = value / baseline if baseline else math.inf
    elif kind == "cliff":
        size = baseline / max(value, 1e-12) if baseline else 0.0
    else:
        size = math.inf
    return (KIND_RANK[kind], -size, get("run"), get("step"))


def _number(value) -> float:
    """Values from JSON may be "NaN"/"Infinity" strings."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class LiveRun:
    """What live diagnosis keeps of one run: its detector, its incidents, and just enough of
    its recent lines to give a new incident the window its causes are judged from."""

    TAIL = 4 * BASELINE  # recent lines kept: a new incident's window starts in them

    def __init__(self, run: str, watch: Watch):
        self.run = run
        self.detector = RunDetector(run, watch)
        self.found: dict[tuple, Incident] = {}
        self.windows: dict[tuple, pd.DataFrame] = {}  # incident -> its lines (they never change)
        self.buckets = BucketRuns()
        self.recent = pd.DataFrame()
        self.last_line = -1
        self.last_event = -1  # events' rowid seen so far

    def feed(self, table: pa.Table, watch: Watch) -> list[Incident]:
        """Judge new lines (a run_lines table); returns the incidents found or grown, each
        remembering its window."""
        frame = frame_of(table, watch)
        self.last_line = int(frame["line_id"].iat[-1])
        runs, owners = self.buckets.feed(table["buckets"].combine_chunks())
        lines = pd.DataFrame({name: table[name].to_numpy(zero_copy_only=False)
                              for name in ("line_id", "step", "attempt", "epoch")})
        lines["bucket_run"], lines["run_bucket"] = runs, owners
        lines = pd.concat([self.recent, lines], ignore_index=True) if len(self.recent) else lines
        changed = {i.key: i for i in self.detector.feed(frame)}
        for key, incident in changed.items():
            if key not in self.windows:
                self.windows[key] = _window(lines, incident)
        self.recent = lines.iloc[-self.TAIL:].reset_index(drop=True)
        self.found.update(changed)
        return list(changed.values())

    def attribute(self, cursor, incidents: list[Incident]) -> None:
        """Causes of the given incidents only, each from its own window; an incident whose
        window was not at hand (a run read before this process started, say) reads the run."""
        stalls = [i for i in self.found.values() if i.kind == "stall"]
        typical = self.buckets.typical()
        whole = None
        for incident in incidents:
            window = self.windows.get(incident.key)
            if window is None:
                whole = whole or load_context(cursor, self.run)
                attribute(incident, whole, stalls)
            else:
                attribute(incident, window_context(cursor, self.run, window, typical), stalls)


    def touched(self, cursor) -> list[Incident]:
        """Incidents whose window holds an event stored since the last call: an event read
        after the lines it explains (a checkpoint_end after the stall it caused) still counts."""
        events = queries.execute(cursor, "diagnose/run_events_after",
                                 {"run": self.run, "after": self.last_event}).fetchall()
        if not events:
            return []
        self.last_event = max(rowid for rowid, _ in events)
        steps = [step for _, step in events if step is not None]
        return [i for i in self.found.values() if _holds(self.windows.get(i.key), steps)]


def _holds(window: pd.DataFrame | None, steps: list[int]) -> bool:
    """Whether an incident's window holds one of ``steps`` (no window at hand: assume so)."""
    if window is None:
        return True
    lo, hi = window["step"].min(), window["step"].max()
    return any(lo <= step <= hi for step in steps)


def _window(lines: pd.DataFrame, incident: Incident) -> pd.DataFrame | None:
    """The lines from where ``incident``'s cause search starts through its first line, or
    None when they are no longer at hand."""
    ids = lines["line_id"].to_numpy()
    lo = np.searchsorted(ids, incident.from_line_id)
    hi = np.searchsorted(ids, incident.line_id)
    if lo >= len(ids) or ids[lo] != incident.from_line_id or hi >= len(ids):
        return None
    return lines.iloc[lo:hi + 1].copy()


class LiveDiagnosis:
    """Feeds each run's new lines to its detector and stores what it finds in `incidents`.
    A tick costs what its new lines cost: only incidents found or grown by them are stored,
    and their causes are judged from their own windows, not from the whole run."""

    def __init__(self, db, watch: Watch):
        self.db, self.watch = db, watch
        self.runs: dict[str, LiveRun] = {}

    def update(self) -> int:
        """Judge every run's new lines; returns incidents stored or changed."""
        cursor = self.db.cursor()
        changed = 0
        for run in run_ids(cursor):
            live = self.runs.setdefault(run, LiveRun(run, self.watch))
            table = queries.arrow(cursor, "run_lines", {"run": run, "after": live.last_line})
            new = live.feed(table, self.watch) if table.num_rows else []
            keys = {i.key for i in new}
            again = [i for i in live.touched(cursor) if i.key not in keys]
            if new or again:
                live.attribute(cursor, new + again)
                changed += self._store(cursor, new + again)
        return changed

    def _store(self, cursor, incidents: list[Incident]) -> int:
        rows = [{f: getattr(i, f) for f in INCIDENT_SCHEMA.names} for i in incidents]
        cursor.register("chunk", records_table(rows, INCIDENT_SCHEMA))
        try:
            queries.execute(cursor, "ingest/incident_upsert")
        finally:
            cursor.unregister("chunk")
        return len(rows)
