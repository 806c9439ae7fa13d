"""Many small runs read in one query, cut into one part per run.

A team's folder holds thousands of runs of a few hundred lines: one query (and through a
server one request) per run and table was most of a first export of them. Runs are grouped
so that a group's rows fit in about one Arrow batch (tables.batch_rows); a run with more rows
than that goes alone, streamed as before, so memory stays bounded whatever the runs hold::

    plan([a(200 rows), b(300), c(10**6), d(5)], budget=131072) -> [[a, b, d], [c]]
    for run, rows in split(answer, ["a", "b", "d"]): ...   # rows: a pyarrow Table, no `run`
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CliffwatchError

# Runs per query: their names travel in one request body (under max_request_bytes, 1 MiB by
# default, even for 255-byte names written as JSON escapes)
MAX_RUNS = 500


def plan(pending: list, budget: int) -> list[list]:
    """``pending`` (each with ``rows``, the rows it will read) in groups of at most
    ``budget`` rows and MAX_RUNS runs; a run over ``budget`` is a group of its own."""
    groups, group, rows = [], [], 0
    for item in pending:
        if item.rows > budget:
            groups.append([item])
            continue
        if group and (rows + item.rows > budget or len(group) >= MAX_RUNS):
            groups.append(group)
            group, rows = [], 0
        group.append(item)
        rows += item.rows
    if group:
        groups.append(group)
    return groups


def split(answer: pa.Table, runs: list[str]) -> list[tuple[str, pa.Table]]:
    """Each of ``runs`` with its rows of ``answer`` (rows grouped by their ``run`` column, in
    the order of ``runs``), without the ``run`` column; a run with no rows gets an empty
    table. Checked whole before any part is written."""
    data = answer.drop_columns(["run"])
    if answer.num_rows:
        groups = pc.run_end_encode(answer.column("run").combine_chunks())
        ends, names = groups.run_ends.to_pylist(), groups.values.to_pylist()
    else:
        ends, names = [], []
    cut, start, found = [], 0, 0
    for run in runs:
        if found < len(names) and names[found] == run:
            cut.append((run, data.slice(start, ends[found] - start)))
            start, found = ends[found], found + 1
        else:
            cut.append((run, data.slice(0, 0)))
    if found != len(names):
        raise CliffwatchError(f"the rows of run {names[found]!r} came out of order or unasked "
                              "for; nothing of this batch was kept: run the export again")
    return cut
