"""Diagnosis of whole runs (on demand) and live (as lines arrive), with the same detector.

    incidents = diagnose(cursor, watch)          # every run, whole
    live = LiveDiagnosis(db, watch); live.update()   # after each ingest tick
"""

from __future__ import annotations

import logging
import math

import pyarrow as pa

from app.db import queries
from app.diagnose.causes import attribute, load_context
from app.diagnose.detect import Incident, RunDetector, Watch
from app.diagnose.load import run_lines
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


class LiveDiagnosis:
    """Feeds each run's new lines to its detector and stores what it finds in `incidents`."""

    def __init__(self, db, watch: Watch):
        self.db, self.watch = db, watch
        self.detectors: dict[str, RunDetector] = {}
        self.last_line: dict[str, int] = {}
        self.found: dict[str, dict[tuple, Incident]] = {}

    def update(self) -> int:
        """Judge every run's new lines; returns incidents stored or changed."""
        cursor = self.db.cursor()
        changed = 0
        for run in run_ids(cursor):
            frame = run_lines(cursor, run, self.watch, self.last_line.get(run, -1))
            if frame.empty:
                continue
            self.last_line[run] = int(frame["line_id"].iat[-1])
            detector = self.detectors.setdefault(run, RunDetector(run, self.watch))
            new = detector.feed(frame)
            if new:
                known = self.found.setdefault(run, {})
                collect(new, known)
                # causes are judged again for all of the run's incidents: an event or a stall
                # that arrived later can change them
                changed += self._store(cursor, with_causes(cursor, run, list(known.values())))
        return changed

    def _store(self, cursor, incidents: list[Incident]) -> int:
        rows = [{f: getattr(i, f) for f in INCIDENT_SCHEMA.names} for i in incidents]
        cursor.register("chunk", records_table(rows, INCIDENT_SCHEMA))
        try:
            queries.execute(cursor, "ingest/incident_upsert")
        finally:
            cursor.unregister("chunk")
        return len(rows)
