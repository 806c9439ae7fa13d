"""What an alert pass must look at: the runs ingest stored something for since the last pass,
and the facts the stall rule's timers need of every live run.

Ingest only appends rows (metric lines, events, rank lines, eval rows), and DuckDB hands out
row ids in commit order, so "what is new" is "what lies beyond the row ids seen": a pass after
which nothing was stored asks one question and reads no row, with 10 runs or 10,000. A full
look (every run whose ``last_seen`` moved since the rules judged it, every live run's facts)
is taken at start, after a failed pass, and every SWEEP_S seconds, for what is no appended
row (a log truncated and read again from its start: its grew_at moves without a row)::

    seen = RowsSeen()
    look = seen.look(cursor, now, progress, active)   # inside the pass's transaction
    look.changed   # [(run, last_seen, last_line, first_time, history_step, last_write)]
    look.live      # {run: Facts} of the runs running (and those named active)
    ...            # after COMMIT:
    seen.applied(look, complete=True, active=active)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..db import queries

SWEEP_S = 60.0  # a full look at least this often (seconds of the pass's clock)
SOURCES = ("line", "event", "rank", "eval")  # tables ingest appends to (engine_changes)


@dataclass(frozen=True)
class Facts:
    """Of one run, as ingest last stored it (alerts/engine_run_facts)."""

    status: str
    last_seen: object  # runs.last_seen: alert_progress.seen once the run is judged
    last_write: float | None  # when the monitor last saw a log of it grow (files.grew_at)
    last_step: int | None


@dataclass(frozen=True)
class Look:
    changed: list[tuple]  # as alerts/engine_changed_runs: the runs to judge lines of
    live: dict[str, Facts]  # running runs (and the active ones named), after this pass
    cursors: dict[str, int] | None  # row ids seen, by source
    full: bool
    now: float


class RowsSeen:
    """Row ids seen and live runs' facts, kept between passes; a new one looks at everything."""

    def __init__(self):
        self.cursors: dict[str, int] | None = None
        self.live: dict[str, Facts] = {}
        self.swept: float | None = None

    def look(self, cursor, now: float, progress: dict, active: list[str]) -> Look:
        """``progress``: the rules' progress by run (as alert_progress holds it);
        ``active``: the runs with a stall pending or firing."""
        if self.cursors is None or not 0 <= now - self.swept < SWEEP_S:
            return self._full(cursor, now, active)
        return self._since(cursor, now, progress)

    def applied(self, look: Look, complete: bool, active: set[str]) -> None:
        """After the pass's COMMIT. ``complete``: every new line was read (else the next
        pass asks again from the same row ids, and reads on from each run's progress)."""
        if complete:
            self.cursors = look.cursors
        if look.full:
            self.swept = look.now
        self.live = {run: facts for run, facts in look.live.items()
                     if facts.status == "running" or run in active}

    def _full(self, cursor, now: float, active: list[str]) -> Look:
        tops = queries.execute(cursor, "alerts/engine_cursors").fetchall()[0]
        changed = queries.execute(cursor, "alerts/engine_changed_runs").fetchall()
        rows = queries.execute(cursor, "alerts/engine_live_runs", {"active": active}).fetchall()
        return Look(changed, _facts(rows), dict(zip(SOURCES, tops, strict=True)), True, now)

    def _since(self, cursor, now: float, progress: dict) -> Look:
        rows = queries.execute(cursor, "alerts/engine_changes", self.cursors).fetchall()
        if not rows:
            return Look([], self.live, self.cursors, False, now)
        cursors = dict(self.cursors)
        for source, _, top in rows:
            cursors[source] = max(cursors[source], top)
        files = sorted({row[1] for row in rows})
        facts = _facts(queries.execute(cursor, "alerts/engine_run_facts",
                                       {"files": files}).fetchall())
        changed = []
        for run, got in facts.items():
            known = progress.get(run) or {}
            changed.append((run, got.last_seen, known.get("last_line"), known.get("first_time"),
                            known.get("history_step"), got.last_write))
        return Look(changed, {**self.live, **facts}, cursors, False, now)


def _facts(rows) -> dict[str, Facts]:
    return {row[0]: Facts(*row[1:]) for row in rows}
