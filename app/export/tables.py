"""What the archive holds, and the two reads an export makes of each table: its marks (per run,
how far the table goes) and a run's rows past a mark. The server's /api/export and an export
that opens the database itself run these same reads::

    marks(cursor) -> {"database": "2026-11-30 04:52:15.1", "tables": {"metrics": [
                      {"run": "sweep/lr 1e-4", "mark": 999999, "rows": 1000000}], ...}}
    rows(cursor, TABLES_BY_NAME["metrics"], "sweep/lr 1e-4", after=-1, upto=999999)
        -> a pyarrow RecordBatchReader of that run's lines, in the order they were logged,
           read a page (one batch) at a time as the reader is read (pages.py)
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
from . import pages

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
    row_id: str = "rowid"  # what after and upto count (a column, or DuckDB's rowid)

    def marks_query(self) -> str:
        return f"export/{self.name}_marks"

    def rows_query(self) -> str:
        return f"export/{self.name}_rows"

    def batch_query(self) -> str:
        return f"export/{self.name}_batch"


TABLES = (Table("metrics", "metrics_all", row_id="line_id"),
          Table("evals", "evals", row_id="line_id"), Table("ranks", "ranks_all"),
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
    """One run's rows of ``t``: those with a row id in (after, upto] for an appended table, a
    page of about BATCH_CELLS cells at a time (each page read whole, so a reader that waits
    holds no query open), all of them for a replaced one."""
    if t.replaced:
        # the DB-API call plans the query once (the relational API twice): 9 ms a run, not
        # 17, which is most of a first export of a thousand small runs
        result = queries.execute(cursor, t.rows_query(), {"run": run})
        return result.to_arrow_reader(batch_rows(len(result.description)))
    schema = _page(cursor, t, run, pages.Page(after, after, 0, 0)).schema  # LIMIT 0
    per_page = batch_rows(len(schema))
    # a page's query sorts its rows and those its first bucket skips: at most 1.25 pages
    span = max(per_page // 4, 1)
    counts = queries.execute(cursor, "export/buckets",
                             {"run": run, "after": after, "upto": upto, "span": span},
                             identifiers={"table": t.source, "id": t.row_id}).fetchall()
    plan = pages.plan(counts, span, after, upto, per_page)
    return pa.RecordBatchReader.from_batches(schema, _paged(cursor, t, run, schema, plan))


def _page(cursor, t: Table, run: str, page: pages.Page) -> pa.Table:
    params = {"run": run, "after": page.after, "upto": page.upto, "skip": page.skip,
              "rows": page.rows}
    result = queries.execute(cursor, t.rows_query(), params)
    return result.to_arrow_reader(max(page.rows, 1)).read_all()


def _paged(cursor, t: Table, run: str, schema: pa.Schema, plan: list[pages.Page]):
    for page in plan:
        table = _page(cursor, t, run, page)
        if table.schema.names != schema.names:
            # ingest added a metric column since the first page: those rows have none of it
            table = table.select(schema.names)
        yield from table.to_batches()


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
