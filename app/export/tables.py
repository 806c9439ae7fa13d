"""What the archive holds, and the two reads an export makes of each table: its marks (per run,
how far the table goes) and a run's rows past a mark. The server's /api/export and an export
that opens the database itself run these same reads::

    marks(cursor) -> {"database": "2026-11-30 04:52:15.1", "tables": {"metrics": [
                      {"run": "sweep/lr 1e-4", "mark": 999999, "rows": 1000000}], ...}}
    rows(cursor, TABLES_BY_NAME["metrics"], "sweep/lr 1e-4", after=-1, upto=999999)
        -> a pyarrow RecordBatchReader of that run's lines, in the order they were logged
    batch(cursor, TABLES_BY_NAME["metrics"], ["a", "b"], after=[-1, 41], upto=[40, 90])
        -> the rows of many runs in one query, with their ``run``, grouped by run in that order

A first export of a team's thousands of small runs reads them a batch at a time (batches.py):
one query per run cost 9 ms, most of that export.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pyarrow as pa

from ..db import queries
from ..errors import CliffwatchError

# Cells (rows x columns) of one Arrow batch, and so of one Parquet row group: about 32 MB of
# doubles, whether a run logs 5 metrics (131,072 rows) or 1,000 (4,096 rows).
BATCH_CELLS = 1 << 22
BATCH_ROWS = (2048, 131_072)


@dataclass(frozen=True)
class Table:
    name: str  # folder in the archive, and /api/export/{name}
    source: str  # the database's table or view
    # appended: rows never change, so a run's rows past its mark are what is new. replaced:
    # rows change in place (an incident grows), so a run's rows are written whole again when
    # their fingerprint changes
    replaced: bool = False

    def marks_query(self) -> str:
        return f"export/{self.name}_marks"

    def rows_query(self) -> str:
        return f"export/{self.name}_rows"

    def batch_query(self) -> str:
        return f"export/{self.name}_batch"


TABLES = (Table("metrics", "metrics_all"), Table("evals", "evals"), Table("ranks", "ranks_all"),
          Table("events", "events"), Table("attempts", "attempts"),
          Table("incidents", "incidents", replaced=True), Table("runs", "runs", replaced=True))
TABLES_BY_NAME = {t.name: t for t in TABLES}


def table(name: str) -> Table:
    if name not in TABLES_BY_NAME:
        raise CliffwatchError(f"no table {name!r} in the archive; tables: "
                              f"{', '.join(TABLES_BY_NAME)}", status=404)
    return TABLES_BY_NAME[name]


def marks(cursor) -> dict:
    """Which database this is, per table and run: mark (highest row id, or a fingerprint for a
    replaced table) and rows, and per table its number of columns (which sizes batches)."""
    created = queries.execute(cursor, "export/database").fetchall()
    found, columns = {}, {}
    for t in TABLES:
        result = queries.execute(cursor, t.marks_query())
        found[t.name] = [{"run": run, "mark": mark, "rows": rows}
                         for run, mark, rows in result.fetchall()]
        shape = queries.execute(cursor, "export/columns", identifiers={"table": t.source})
        columns[t.name] = len(shape.description) - 1  # less run, the partition
    return {"database": created[0][0] if created else None, "tables": found,
            "columns": columns}


def batch_rows(columns: int | None) -> int:
    """Rows of one Arrow batch of a table with ``columns`` columns (about BATCH_CELLS cells):
    also the most rows an export reads in one batch of runs."""
    return min(max(BATCH_CELLS // max(columns or BATCH_CELLS, 1), BATCH_ROWS[0]), BATCH_ROWS[1])


def rows(cursor, t: Table, run: str, after: int | None, upto: int | None
         ) -> pa.RecordBatchReader:
    """One run's rows of ``t``: those with a row id in (after, upto] for an appended table,
    all of them for a replaced one; streamed in batches of about BATCH_CELLS cells."""
    params = {"run": run} if t.replaced else {"run": run, "after": after, "upto": upto}
    # the DB-API call plans the query once (the relational API twice): 9 ms a run, not 17,
    # which is most of a first export of a thousand small runs
    result = queries.execute(cursor, t.rows_query(), params)
    return result.to_arrow_reader(batch_rows(len(result.description)))


def batch(cursor, t: Table, runs: list[str], after: list[int] | None,
          upto: list[int] | None) -> pa.RecordBatchReader:
    """The rows of ``t`` of many runs in one query, ``run`` included, grouped by run in the
    order of ``runs``: for an appended table, of runs[i] those with a row id in (after[i],
    upto[i]]; for a replaced one, all of them."""
    params = {"runs": runs} if t.replaced else {"runs": runs, "after": after, "upto": upto}
    result = queries.execute(cursor, t.batch_query(), params)
    return result.to_arrow_reader(batch_rows(len(result.description)))


# DuckDB warns that Arrow from a DB-API result copies each batch once more: beside writing
# it to Parquet, the copy costs nothing measurable (1,000,000 lines read in the same time)
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result",
                        category=UserWarning, module=__name__)
