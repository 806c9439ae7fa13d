"""What ``GET /metrics`` tells Prometheus: the newest values of the runs being trained now,
and the monitor's own health, read from one snapshot of the database (docs/prometheus.md)::

    cliffwatch_run_metric{metric="loss",run="sweep3/lr1e-4"} 0.8123
    cliffwatch_run_step{run="sweep3/lr1e-4"} 4200.0
    cliffwatch_run_seconds_since_last_line{run="sweep3/lr1e-4"} 1.9
    cliffwatch_run_open_incidents{kind="spike",run="sweep3/lr1e-4"} 1.0
    cliffwatch_ingest_lag_seconds 0.1
    cliffwatch_outbox_pending 0.0

Metric names are fixed; a training metric is a label value (``metric="loss"``), so a run that
logs a new key adds series, never a Prometheus metric name. Series are bounded three ways:
only runs written lately are exported (an ended run for ``metrics_grace`` seconds after its
last line, one without ``run_end`` for ``metrics_silence``), at most ``metrics_max_runs`` of
them, and only the metrics named by ``loss_metrics``, ``accuracy_metrics`` and
``metrics_export``. A scrape costs a filter of the files table plus a read of the exported
runs' lines written since the previous scrape (``Anchors``), whatever the number of runs
stored.
"""

from __future__ import annotations

import contextlib
import fnmatch
import time
from collections.abc import Iterator
from dataclasses import dataclass

import duckdb
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..alerts.fields import KINDS
from ..db import queries
from ..diagnose.rules import Watch
from . import system
from .tiles import columns

PREFIX = "cliffwatch_"


@dataclass(frozen=True)
class IngestFacts:
    """What the server knows about ingest beyond the database."""

    lag_s: float  # seconds since everything complete on disk was ingested
    failing: bool


@dataclass(frozen=True)
class Run:
    run: str
    status: str  # running | completed | failed | interrupted
    last_write: float  # Unix seconds the monitor last saw its logs grow (files.grew_at)
    step: int | None  # last step of its newest metrics file
    values: dict[str, float]  # newest value of each exported metric


@dataclass(frozen=True)
class Snapshot:
    now: float
    runs: list[Run]
    incidents: dict[tuple[str, str], int]  # (run, kind) -> open incidents
    monitor: dict[str, int]  # queries/metrics/monitor.sql's row
    # the runs' newest system samples and their GPUs' rows (read/system.py's ``latest``)
    system: tuple[list[dict], list[dict]] = ([], [])


def exported(names: list[str], settings) -> list[str]:
    """The metric columns /metrics exports: those diagnosis watches (Watch.of: loss_metrics,
    accuracy_metrics) and those matching a glob of metrics_export, all compared case-blind."""
    watch = Watch.of(settings)
    export = [g.strip().lower() for g in settings.metrics_export.split(",") if g.strip()]
    return [n for n in names if watch.kind_of(n)
            or any(fnmatch.fnmatchcase(n.lower(), g) for g in export)]


class Anchors:
    """What the previous scrape found: each exported metrics file's newest line (a rowid) and
    newest values, and ``seen``, the newest of those lines. Every line at or below ``seen``
    was visible to that scrape (one writer appends to metric_rows, nothing deletes from it,
    so rowids only grow), so the next scrape looks for a known file's new lines only past
    ``seen`` and reads values again only for files that grew: a scrape costs the lines
    written since the last one. A file met for the first time costs its lines past its
    chart-tile watermark."""

    def __init__(self):
        # (file id -> (newest rowid, values), seen), replaced whole by each scrape
        self.known: tuple[dict[int, tuple[int, dict[str, float]]], int] = ({}, -1)


def read(cursor, settings, now: float | None = None, anchors: Anchors | None = None) -> Snapshot:
    """Everything a scrape reports, in one read-only transaction (one consistent snapshot).
    ``anchors``: what earlier scrapes found (the server keeps one; None reads afresh)."""
    now = time.time() if now is None else now
    anchors = Anchors() if anchors is None else anchors
    try:
        queries.execute(cursor, "db/begin_read_only")
        rows = queries.execute(cursor, "metrics/runs", {
            "now": now, "grace_s": settings.metrics_grace, "silence_s": settings.metrics_silence,
            "max_runs": settings.metrics_max_runs}).fetchall()
        values = newest_values(cursor, settings, rows, anchors)
        runs = [Run(run, status, last_write, step, values.get(file, {}))
                for run, status, last_write, file, step, _ in rows]
        stepped = [r for r in runs if r.step is not None]
        incidents = {(run, kind): n for run, kind, n in queries.execute(
            cursor, "metrics/open_incidents", {"runs": [r.run for r in stepped],
                                               "steps": [r.step for r in stepped]}).fetchall()}
        samples = system.latest(cursor, [r.run for r in runs],
                                now - max(settings.metrics_grace, settings.metrics_silence))
        monitor = queries.execute(cursor, "metrics/monitor")
        names = [d[0] for d in monitor.description]
        return Snapshot(now, runs, incidents, dict(zip(names, monitor.fetchone(), strict=True)),
                        samples)
    finally:
        # nothing was written: the snapshot just ends (and a cursor a failed BEGIN found in a
        # transaction leaves it, so the next scrape on this thread starts clean)
        with contextlib.suppress(duckdb.Error):
            queries.execute(cursor, "db/rollback")


def newest_values(cursor, settings, rows: list[tuple],
                  anchors: Anchors) -> dict[int, dict[str, float]]:
    """{file id: {metric: newest value}} of the exported runs' newest metrics files: from the
    ``TAIL_LINES`` rowids ending at each file's newest line (the Runs page's window), over
    what an earlier scrape found (a metric logged rarely keeps its value)."""
    from .runs import TAIL_LINES  # the Runs page's reader imports pandas: not at start-up

    known, seen = anchors.known  # one view, whatever a scrape running beside this one does
    marks = {file: after for _, _, _, file, _, after in rows if file is not None}
    names = exported(columns(cursor), settings) if marks else []
    if not names:
        return {}
    ids = list(marks)
    after = [max(marks[f], seen) if f in known else marks[f] for f in ids]
    newer = dict(queries.execute(cursor, "metrics/file_ends", {
        "files": ids, "after": after, "floor": min(after), **span(ids)}).fetchall())
    ends = {f: newer[f] if newer[f] is not None else max(marks[f], known.get(f, (-1,))[0])
            for f in ids}
    grown = [f for f in ids if f not in known or ends[f] != known[f][0]]
    found = {f: dict(known[f][1]) if f in known else {} for f in ids}
    if grown:
        lasts = [ends[f] for f in grown]
        for file, metric, value in queries.execute(cursor, "metrics/values", {
                "files": grown, "last": lasts, "names": names, "window": TAIL_LINES,
                "floor": min(lasts) - TAIL_LINES, **span(grown)}).fetchall():
            found[file][metric] = value
    anchors.known = ({f: (ends[f], found[f]) for f in ids}, max(ends.values()))
    return found


def span(files: list[int]) -> dict[str, int]:
    """The file id range of a scan: row groups holding only other files' lines are skipped."""
    return {"first_file": min(files), "last_file": max(files)}


def families(snapshot: Snapshot, ingest: IngestFacts) -> Iterator[Metric]:
    """The Prometheus metric families of one snapshot: runs first, then the monitor."""
    yield from run_families(snapshot)
    yield from monitor_families(snapshot, ingest)


def run_families(snapshot: Snapshot) -> Iterator[Metric]:
    metric = _gauge("run_metric", "Newest value of a training metric of a run being exported "
                    "(loss_metrics, accuracy_metrics, metrics_export)", ["run", "metric"])
    step = _gauge("run_step", "Last step logged by the run's newest metrics file", ["run"])
    written = _gauge("run_last_line_timestamp_seconds", "When the run's logs were last "
                     "written (Unix seconds, file modification time)", ["run"])
    since = _gauge("run_seconds_since_last_line", "Seconds since the run's logs were last "
                   "written", ["run"])
    info = _gauge("run_info", "1 for each run exported, with its status from run_start / "
                  "run_end (running, completed, failed, interrupted)", ["run", "status"])
    incidents = _gauge("run_open_incidents", "Incidents diagnosed on the run whose episode "
                       "reaches its newest line, by kind", ["run", "kind"])
    for run in snapshot.runs:
        for name, value in sorted(run.values.items()):
            metric.add_metric([run.run, name], value)
        if run.step is not None:
            step.add_metric([run.run], run.step)
            for kind in KINDS:
                incidents.add_metric([run.run, kind], snapshot.incidents.get((run.run, kind), 0))
        written.add_metric([run.run], run.last_write)
        since.add_metric([run.run], max(0.0, snapshot.now - run.last_write))
        info.add_metric([run.run, run.status], 1)
    yield from (metric, step, written, since, info, incidents)
    yield from system.families(*snapshot.system)


def monitor_families(snapshot: Snapshot, ingest: IngestFacts) -> Iterator[Metric]:
    facts = snapshot.monitor
    yield _gauge("ingest_lag_seconds", "Seconds since everything complete on disk was "
                 "ingested", value=ingest.lag_s)
    yield _gauge("ingest_failing", "1 while ingest is failing (GET /api/health says why)",
                 value=float(ingest.failing))
    errors = CounterMetricFamily(PREFIX + "ingest_errors", "Log lines recorded as bad, by "
                                 "severity: error (not stored) or warning (stored, but odd)",
                                 labels=["severity"])
    errors.add_metric(["error"], facts["ingest_errors"])
    errors.add_metric(["warning"], facts["ingest_warnings"])
    yield errors
    yield _gauge("runs", "Runs stored", value=facts["runs"])
    yield _gauge("runs_exported", "Runs with series on this page", value=len(snapshot.runs))
    yield _gauge("metric_rows", "Metric lines stored", value=facts["metric_rows"])
    yield _gauge("files_watched", "Log files tracked (not deleted)", value=facts["files_watched"])
    yield _gauge("files_skipped", "Files found but not read (GET /api/health says why)",
                 value=facts["files_skipped"])
    yield _gauge("outbox_pending", "Notifications waiting to be delivered (the delivery queue)",
                 value=facts["outbox_pending"])
    failed = CounterMetricFamily(PREFIX + "deliveries_failed", "Notifications given up: "
                                 "refused by the receiver (failed) or retried past "
                                 "webhook_give_up (expired)", labels=["status"])
    failed.add_metric(["failed"], facts["outbox_failed"])
    failed.add_metric(["expired"], facts["outbox_expired"])
    yield failed
    alerts = _gauge("alerts", "Alert rule states pending or firing", ["state"])
    alerts.add_metric(["pending"], facts["alerts_pending"])
    alerts.add_metric(["firing"], facts["alerts_firing"])
    yield alerts


def _gauge(name: str, help_text: str, labels: list[str] | None = None,
           value: float | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, help_text, value=value, labels=labels)


class Collector:
    """A prometheus_client collector over one snapshot of the database: a private
    ``CollectorRegistry`` holding it gives the text of one scrape (``generate_latest``)."""

    def __init__(self, cursor, settings, ingest: IngestFacts, anchors: Anchors | None = None):
        self.cursor, self.settings, self.ingest, self.anchors = cursor, settings, ingest, anchors

    def describe(self) -> list[Metric]:
        return []  # registering must not read the database; the names are fixed anyway

    def collect(self) -> Iterator[Metric]:
        yield from families(read(self.cursor, self.settings, anchors=self.anchors), self.ingest)
