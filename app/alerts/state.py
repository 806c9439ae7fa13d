"""Alert states per (rule, run, metric) and the unit of work that changes them.

A ``PassWrites`` collects state changes, their transitions, the notifications they cause and the
runs' progress, and writes them all in ONE transaction: a crash leaves either all of it or
none, so a restart neither re-sends a notification nor forgets a state change::

    batch = PassWrites(states, now)
    st = batch.get(("loss-high", "run-a", "loss"))
    batch.move(st, "pending", step=412, value=7.3)
    batch.notify(rule, st, "firing", facts, silenced=False)
    queued = batch.commit(cursor, target_ids)   # outbox rows written
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
from dataclasses import dataclass, field

import duckdb
import orjson
import pyarrow as pa

from ..db import queries
from ..ingest.parse import records_table

ACTIVE = ("pending", "firing")
Key = tuple[str, str, str]  # (rule, run, metric)


@dataclass
class AlertState:
    rule: str
    run: str
    metric: str  # '' for a rule about the whole run (stall)
    state: str = "inactive"
    episode: int = 0
    changed_time: float = 0.0
    changed_step: int | None = None
    pending_time: float | None = None
    pending_lines: int = 0
    value: float | None = None
    notified_time: float | None = None
    detail: dict = field(default_factory=dict)
    repeats: int = 0

    @property
    def key(self) -> Key:
        return (self.rule, self.run, self.metric)

    def row(self) -> dict:
        row = dataclasses.asdict(self)
        row["detail"] = dumps(self.detail)
        row["value"] = finite_or_none(self.value)
        return row


@dataclass
class Note:
    key: str
    rule: str
    run: str
    metric: str | None
    kind: str
    severity: str
    created_time: float
    silenced: bool
    facts: dict


STATES = pa.schema([
    ("rule", pa.string()), ("run", pa.string()), ("metric", pa.string()),
    ("state", pa.string()), ("episode", pa.int32()), ("changed_time", pa.float64()),
    ("changed_step", pa.int64()), ("pending_time", pa.float64()), ("pending_lines", pa.int32()),
    ("value", pa.float64()), ("notified_time", pa.float64()), ("detail", pa.string()),
    ("repeats", pa.int32())])
TRANSITIONS = pa.schema([
    ("rule", pa.string()), ("run", pa.string()), ("metric", pa.string()),
    ("from_state", pa.string()), ("to_state", pa.string()), ("time", pa.float64()),
    ("step", pa.int64()), ("value", pa.float64())])
PROGRESS = pa.schema([
    ("run", pa.string()), ("last_line", pa.int64()), ("seen", pa.timestamp("us")),
    ("first_time", pa.float64()), ("history_step", pa.int64())])
NOTES = pa.schema([
    ("id", pa.int64()), ("key", pa.string()), ("rule", pa.string()), ("run", pa.string()),
    ("metric", pa.string()), ("kind", pa.string()), ("severity", pa.string()),
    ("created_time", pa.float64()), ("silenced", pa.bool_()), ("facts", pa.string())])
OUTBOX = pa.schema([
    ("notification_id", pa.int64()), ("target", pa.string()), ("status", pa.string()),
    ("attempts", pa.int32()), ("next_time", pa.float64())])


def _store(cursor, query: str, rows: list[dict], schema: pa.Schema) -> list[tuple]:
    """One statement for all rows (a registered Arrow table); what it returns."""
    if not rows:
        return []
    cursor.register("chunk", records_table(rows, schema))
    try:
        return queries.execute(cursor, query).fetchall()
    finally:
        with contextlib.suppress(duckdb.Error):  # in an aborted transaction this fails too
            cursor.unregister("chunk")


def load_states(cursor) -> dict[Key, AlertState]:
    result = queries.execute(cursor, "alerts/engine_states_load")
    names = [d[0] for d in result.description]
    states = {}
    for values in result.fetchall():
        row = dict(zip(names, values, strict=True))
        row["detail"] = orjson.loads(row["detail"] or "{}")
        st = AlertState(**row)
        states[st.key] = st
    return states


def note_key(st: AlertState, kind: str) -> str:
    """Stable per notification: the same (state, episode, kind, repeat) is one key forever."""
    extra = f"|{st.repeats}" if kind == "repeat" else ""
    text = f"{st.rule}|{st.run}|{st.metric}|{st.episode}|{kind}{extra}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def finite_or_none(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def json_number(value):
    """A number as the API writes it: NaN and infinities as strings."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def dumps(obj) -> str:
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS).decode()


class PassWrites:
    """State changes of one pass, written together by ``commit``."""

    def __init__(self, states: dict[Key, AlertState], now: float):
        self.states, self.now = states, now
        self.dirty: dict[Key, AlertState] = {}
        self.transitions: list[dict] = []
        self.notes: list[Note] = []
        self.progress: dict[str, dict] = {}

    def peek(self, key: Key) -> AlertState | None:
        if key in self.dirty:
            return self.dirty[key]
        return self.states.get(key)

    def get(self, key: Key) -> AlertState:
        """The state to change (a copy until committed); a new inactive one if none."""
        if key not in self.dirty:
            known = self.states.get(key)
            self.dirty[key] = (dataclasses.replace(known, detail=dict(known.detail)) if known
                               else AlertState(*key, changed_time=self.now))
        return self.dirty[key]

    def move(self, st: AlertState, to: str, *, step: int | None, value: float | None) -> None:
        self.transitions.append({"rule": st.rule, "run": st.run, "metric": st.metric,
                                 "from_state": st.state, "to_state": to, "time": self.now,
                                 "step": step, "value": finite_or_none(value)})
        st.state, st.changed_time, st.changed_step, st.value = to, self.now, step, value

    def notify(self, note: Note) -> None:
        self.notes.append(note)

    def commit(self, cursor, target_ids: list[str]) -> int:
        """Writes everything in the current transaction (one statement per table); returns
        the outbox rows queued."""
        _store(cursor, "alerts/engine_states_store", [st.row() for st in self.dirty.values()],
               STATES)
        _store(cursor, "alerts/engine_transitions_store", self.transitions, TRANSITIONS)
        _store(cursor, "alerts/engine_progress_store", list(self.progress.values()), PROGRESS)
        written = self._write_notes(cursor)
        queue = [{"notification_id": i, "target": target, "status": "pending", "attempts": 0,
                  "next_time": self.now} for i, silenced in written if not silenced
                 for target in target_ids]
        _store(cursor, "alerts/engine_outbox_store", queue, OUTBOX)
        return len(queue)

    def _write_notes(self, cursor) -> list[tuple]:
        seen: set[str] = set()
        notes = [n for n in self.notes if not (n.key in seen or seen.add(n.key))]
        if not notes:
            return []
        ids = sorted(r[0] for r in queries.execute(cursor, "alerts/engine_notification_ids",
                                                   {"n": len(notes)}).fetchall())
        rows = [dict(dataclasses.asdict(n), id=i, facts=dumps(n.facts))
                for i, n in zip(ids, notes, strict=True)]
        return _store(cursor, "alerts/engine_notifications_store", rows, NOTES)

    def applied(self) -> None:
        """After COMMIT: the copies become the states."""
        self.states.update(self.dirty)
