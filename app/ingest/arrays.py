"""Arrow arrays to and from numpy by their buffers, for the bulk writes (issue 23).

pyarrow imports pandas the first time ``pa.array``, ``pa.repeat`` or ``to_numpy`` runs:
0.35 s of one core holding the GIL, which the server's first catch-up of an event file paid
while Streamlit imported beside it (41% of ``ingest --once`` on a 1,000,000-event file).
These make the same arrays from the buffers, which imports nothing::

    steps = to_numpy(table.column("step"))       # int64; NaN where a float column is null
    table.append_column("attempt", from_numpy(attempts.astype(np.int32)))
    table.append_column("run", repeat("run-a", table.num_rows))

A type with no plain numpy twin (booleans, lists, strings) goes through pyarrow's own
``to_numpy``, which may import pandas then: the rows of the bulk paths never hold one.
"""

from __future__ import annotations

from ..lazy import LazyModule

np = LazyModule("numpy")  # parse.py's JSONL path imports this module, and no numpy
pa = LazyModule("pyarrow")

_NUMPY = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
          "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
          "halffloat": "float16", "float": "float32", "double": "float64"}  # Arrow -> numpy


def to_numpy(column) -> np.ndarray:
    """A numeric Array or ChunkedArray as numpy, as ``to_numpy(zero_copy_only=False)`` gives
    it: its own type with no nulls, else NaN at the nulls (float64 for an integer type)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    name = _NUMPY.get(str(array.type))
    if name is None:
        return array.to_numpy(zero_copy_only=False)
    dtype = np.dtype(name)
    validity, data = array.buffers()
    values = np.frombuffer(data, dtype, count=len(array), offset=array.offset * dtype.itemsize)
    if not array.null_count:
        return values
    held = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")
    out = values.astype(values.dtype if values.dtype.kind == "f" else np.float64)
    out[~held[array.offset:array.offset + len(array)].astype(bool)] = np.nan
    return out


def from_numpy(values: np.ndarray, held: np.ndarray | None = None):
    """A numeric numpy column as an Arrow array over its own buffer, NULL where not ``held``:
    ``pa.array(values, mask=~held)``."""
    values = np.ascontiguousarray(values)
    validity = None if held is None else pa.py_buffer(np.packbits(held, bitorder="little"))
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [validity, pa.py_buffer(values)])


def repeat(value: int | str, count: int, dtype="int32"):
    """``count`` copies of one integer (as ``dtype``) or string: ``pa.repeat``."""
    if isinstance(value, int):
        return from_numpy(np.full(count, value, dtype))
    text = value.encode()
    offsets = np.arange(count + 1, dtype=np.int64) * len(text)
    if offsets[-1] < 2**31:  # a string column, not large_string, when it fits (as pa.repeat)
        return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(
            offsets.astype(np.int32)), pa.py_buffer(text * count)])
    return pa.Array.from_buffers(pa.large_string(), count, [None, pa.py_buffer(offsets),
                                                             pa.py_buffer(text * count)])


def from_values(values: list, kind):
    """``pa.array(values, kind)`` of Python values, by numpy for string, integer and float
    columns (None is NULL); another type, or a value the numpy path cannot take, goes to
    ``pa.array``, which answers as it always did (its error included)."""
    try:
        if pa.types.is_string(kind):
            return _strings(values)
        dtype = _NUMPY.get(str(kind))
        if dtype is not None and all(type(v) in _PLAIN for v in values):
            held = np.array([v is not None for v in values], bool)
            numbers = np.array([0 if v is None else v for v in values], dtype)
            return from_numpy(numbers, None if held.all() else held)
    except (OverflowError, TypeError, ValueError, UnicodeEncodeError):
        pass
    return pa.array(values, kind)


_PLAIN = (int, float, type(None))


def _strings(values: list):
    if not all(type(v) in (str, type(None)) for v in values):
        raise TypeError("not all strings")
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(values) + 1, np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("past a string column")
    held = np.array([v is not None for v in values], bool)
    validity = None if held.all() else pa.py_buffer(np.packbits(held, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(values), [
        validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))])
