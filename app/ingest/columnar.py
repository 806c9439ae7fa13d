"""TensorBoard scalars handed to the store as columns (issue 23): the arrays the bulk reader
decoded (formats/tfbulk.py) become the batch's Arrow tables at once, which the store inserts
through DuckDB's Arrow scan in its one transaction (writing.py), with the file's offset. A
million steps made a million records, dicts and rows one by one before (careful.from_records:
~90% of an event file's ingest); the rows, offsets, problems and columns are the same::

    parsed = columnar.parsed(tfevents.read(data, base, final=True), first=base == 0)
    parsed.rows        # step, time, loss, lr, ...: one row per step, as from_records makes it
    parsed.evals       # the eval/* tags' rows, with their kind

A batch whose keys need metric_row's words (two tags that end in one column, on one row or
spelled two ways) is declined (None), and read record by record the careful way.
"""

from __future__ import annotations

import numpy as np

from ..keys import STEP, TIME
from ..lazy import LazyModule
from .arrays import from_numpy, repeat
from .columns import SPECIAL, column_name, fold
from .formats import EVAL, tfbulk, tfevents
from .parse import Parsed

pa = LazyModule("pyarrow")


def parsed(got: tfevents.Read, first: bool) -> Parsed | None:
    """The batch of one read, or None where the careful path has to read it (above).
    ``first``: a file's first batch keeps the ``info`` notes (careful.from_records)."""
    out = Parsed(problems=[p for p in got.problems if first or p.severity != "info"])
    if not len(got.groups):
        return out
    found, groups = got.found, got.groups
    sizes = np.diff(np.append(groups, len(found.step)))
    shapes, which = tfbulk.row_shapes(found, groups, sizes)
    plans = [tfevents.kinds(tuple(found.tags[t] for t in shape)) for shape in shapes]
    times = np.maximum.reduceat(found.time, groups)
    made = [_table(found, groups, which, times, [p[part:part + 2] for p in plans])
            for part in (0, 2)]  # the training tags, then the evaluation ones (kinds)
    if None in made:
        return None
    (out.rows, train_at), (evals, eval_at) = made
    out.row_offsets, out.eval_offsets = train_at, eval_at
    if evals is not None:
        out.evals = evals.append_column("kind", repeat(EVAL, evals.num_rows))
    return out


def _table(found, groups, which, times, plan):
    """``(table, offsets)`` of the rows of one kind (None, [] where no row has it), or None
    where a column would need metric_row's rules. ``plan[shape]``: the (positions, keys)
    of that row shape's tags of this kind."""
    has = np.array([bool(places) for places, _ in plan])
    rows = np.flatnonzero(has[which])
    if not len(rows):
        return None, []
    starts, shape_of = groups[rows], which[rows]
    names = _names(plan, shape_of)
    if names is None:
        return None
    columns = {STEP: from_numpy(found.step[starts]), TIME: from_numpy(times[rows])}
    for name, places in names.items():
        columns[name] = _values(found.value, starts, shape_of, places)
    schema = pa.schema([(name, pa.type_for_alias(SPECIAL.get(name, "float64")))
                        for name in columns])
    return pa.table(columns, schema=schema), found.offset[starts].tolist()


def _names(plan, shape_of: np.ndarray) -> dict[str, dict[int, int]] | None:
    """Each column, in the order from_records meets them (row by row, a row's keys in its
    order), with the position of its value in each row shape that has it: {name: {shape:
    position}}. None where two keys of a row share a column, a column is spelled two ways,
    or a key's column is one of the special ones of another type."""
    shapes, firsts = np.unique(shape_of, return_index=True)
    names: dict[str, dict[int, int]] = {}
    spelled = {fold(STEP): STEP, fold(TIME): TIME}
    for shape in shapes[np.argsort(firsts)].tolist():
        places, keys = plan[shape]
        columns = [column_name(key) for key in keys]
        if len({fold(c) for c in columns} | {fold(STEP), fold(TIME)}) != len(columns) + 2:
            return None
        for column, place in zip(columns, places, strict=True):
            if spelled.setdefault(fold(column), column) != column \
                    or SPECIAL.get(column, "float64") != "float64":
                return None
            names.setdefault(column, {})[shape] = place
    return names


def _values(value: np.ndarray, starts: np.ndarray, shape_of: np.ndarray,
            places: dict[int, int]):
    """One column: each row's value at its shape's position, NULL in rows without it."""
    (shape, place), *others = places.items()
    if not others and (shape_of == shape).all():
        return from_numpy(value[starts + place])
    out = np.zeros(len(starts))
    held = np.zeros(len(starts), bool)
    for shape, place in places.items():
        mine = shape_of == shape
        out[mine], held[mine] = value[starts[mine] + place], True
    return from_numpy(out, held)

