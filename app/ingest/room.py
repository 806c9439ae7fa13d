"""The column room: which metric columns a table has, and whether new keys may get theirs.

New metric keys get their columns first, in small transactions of their own, up to the cap
(``max_metric_columns``); further keys go to the map column ``extra_metrics`` (one warning
per run names them). Column names come from ``columns.py``, and are compared as DuckDB does.
The one column-room check of every path (fast, batch, careful) is ``fits``::

    room = ColumnRoom(db, cap=lambda: 2000)
    room.fits("metric_rows", ["loss", "lr"])   # -> True: both fit under the cap
    room.add("metric_rows", ["loss", "lr"])    # committed ahead of the rows
"""

from __future__ import annotations

from ..lazy import LazyModule
from .columns import OVERFLOW, column_name, fold, is_metric_column
from .parse import Problem
from .writing import table_of

np = LazyModule("numpy")
pa = LazyModule("pyarrow")

# ALTER TABLEs per transaction: DuckDB keeps every version of the table's catalog entry until
# commit, so n columns added in one transaction cost memory ~ n^2 outside memory_limit (5,000
# keys: 6.9 GB). Small committed groups keep it flat; an empty column is harmless.
ALTERS_PER_TRANSACTION = 64


class ColumnRoom:
    def __init__(self, db, cap):
        self.db = db
        self.cap = cap  # () -> metric columns allowed per table (the store's max_columns)
        self._columns: dict[str, dict[str, str]] = {}  # table -> {folded name: name}
        self.reported: dict[str, set[str]] = {}  # run -> keys reported as overflowing

    def known(self, table: str) -> dict[str, str]:
        """The table's columns: {name folded as DuckDB compares them: name} (cached)."""
        if table not in self._columns:
            result = self.db.run("ingest/table_columns", {"table": table}).fetchall()
            self._columns[table] = {fold(r[0]): r[0] for r in result}
        return self._columns[table]

    def forget(self) -> None:
        """After a rollback: a rolled-back ALTER TABLE must be seen again."""
        self._columns.clear()

    def room(self, table: str) -> int:
        """Metric columns ``table`` may still get under the cap (below 0 if the cap was
        lowered since)."""
        return self.cap() - sum(map(is_metric_column, self.known(table)))

    def fits(self, table: str, names) -> bool:
        """Whether the metric columns among ``names`` that ``table`` lacks fit its room: the
        one column-room check of every path."""
        known = self.known(table)
        return sum(is_metric_column(n) for n in names if fold(n) not in known) \
            <= self.room(table)

    def add(self, table: str, names: list[str]) -> None:
        """Add columns in small transactions of their own (ALTERS_PER_TRANSACTION each),
        committed before the rows."""
        for start in range(0, len(names), ALTERS_PER_TRANSACTION):
            cur = self.db.cursor()
            cur.begin()
            try:
                self.ensure(cur, table, names[start:start + ALTERS_PER_TRANSACTION])
                cur.commit()
            except BaseException:
                self.forget()
                self.db.rollback(cur)
                raise

    def ensure(self, cur, table: str, names: list[str]) -> None:
        """Add the columns among ``names`` that ``table`` lacks, in the open transaction."""
        known = self.known(table)
        for name in names:
            if fold(name) not in known:
                query = {"buckets": "ingest/add_list_column",
                         OVERFLOW: "ingest/add_overflow_column"}.get(name, "ingest/add_column")
                self.db.run(query, identifiers={"table": table, "column": name})
                known[fold(name)] = name

    def fit(self, state, batch, reporting: set[str]) -> set[str]:
        """Give the batch's new metric keys their columns (committed ahead, in small groups)
        up to the cap; move the rest into the OVERFLOW map, with one warning per run for keys
        not reported before (nor in ``reporting``: this transaction's other batches of the
        run). Returns the keys it reports."""
        rows = batch.parsed.rows
        if rows is None or not rows.num_rows:
            return set()
        if state.kind == "rank":  # the rank a line names is its file's rank (log-format.md)
            rows = batch.parsed.rows = rows.drop_columns(
                [n for n in rows.column_names if fold(n) == fold(column_name("rank"))])
        table = table_of(state.kind)
        known = self.known(table)
        new = [n for n in rows.column_names if fold(n) not in known]
        extra = [n for n in new if is_metric_column(n)][max(0, self.room(table)):]
        if extra:
            moved = set(extra)
            new = [n for n in new if n not in moved]
            batch.parsed.rows = rows = overflow(rows, extra)
            if fold(OVERFLOW) not in known:
                new.append(OVERFLOW)
        self.add(table, new)
        before = self.reported.get(state.run, set()) | reporting
        unnoted = [n for n in extra if n not in before]
        if unnoted:
            first = int(np.argmax(rows.column(OVERFLOW).is_valid().to_numpy(
                zero_copy_only=False)))  # the first line that carries one
            offsets = batch.parsed.row_offsets
            offset = offsets[first] if first < len(offsets) else 0
            batch.parsed.problems.append(_overflow_problem(self.cap(), offset, unnoted))
        return set(unnoted)


def overflow(rows: pa.Table, names: list[str]) -> pa.Table:
    """``rows`` with the columns ``names`` moved into the map column OVERFLOW (``{name:
    value}`` of each row's non-NULL ones; NULL when it has none). Cost follows the values
    present, not rows times names: wide logs are often sparse."""
    row_ids, key_ids, values = [], [], []
    index = {name: i for i, name in enumerate(rows.column_names)}  # column(name) scans them
    for i, name in enumerate(names):
        column = rows.column(index[name])
        present = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
        row_ids.append(present)
        key_ids.append(np.full(len(present), i))
        values.append(column.take(present).to_numpy(zero_copy_only=False))
    row_id = np.concatenate(row_ids)
    order = np.argsort(row_id, kind="stable")
    counts = np.bincount(row_id, minlength=rows.num_rows)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32())
    keys = pa.array(names, pa.string()).take(pa.array(np.concatenate(key_ids)[order]))
    items = pa.array(np.concatenate(values)[order], pa.float64())
    extra = pa.MapArray.from_arrays(offsets, keys, items, mask=pa.array(counts == 0))
    moved = set(names)
    kept = rows.select([i for i, name in enumerate(rows.column_names) if name not in moved])
    return kept.append_column(pa.field(OVERFLOW, pa.map_(pa.string(), pa.float64())), extra)


def _overflow_problem(max_columns: int, offset: int, unnoted: list[str]) -> Problem:
    shown = ", ".join(unnoted[:20]) + (f" and {len(unnoted) - 20} more"
                                         if len(unnoted) > 20 else "")
    return Problem(offset, "warning", f"metric column limit reached (max_metric_columns="
                   f"{max_columns}): {len(unnoted)} key(s) kept in the map column "
                   f"{OVERFLOW} (read one as {OVERFLOW}['key']): {shown}; raise "
                   "--max-metric-columns to give new keys their own columns (the cap is "
                   "also at most --memory-limit / 512 KiB: raise both)")
