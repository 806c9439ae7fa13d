"""What the memory limit allows ingest: how many metric columns fit, and which failures mean
"smaller, or more memory".

An INSERT into a table pins one 256 KiB block per column of the table, whatever columns the
batch holds (measured on DuckDB 2.0 with a 20,000-line batch: at ``memory_limit`` 128MB the
insert failed from ~400 columns, at 256MB from ~740, at 512MB from ~1,500; about 340 KiB of the
limit per column). So a table may have at most ``memory_limit / COLUMN_BYTES`` metric columns,
which leaves about a third of the limit for everything else (ad-hoc queries, the view)::

    column_room("256MB")    # -> 488
    column_room("1GiB")     # -> 2048
"""

from __future__ import annotations

import re

import duckdb

COLUMN_BYTES = 512 * 1024  # of memory_limit per metric column
UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def limit_bytes(limit: str) -> int | None:
    """``memory_limit`` in bytes as DuckDB reads it (MB = 10^6, MiB = 2^20), or None when it
    is not a plain size (then no cap is derived from it)."""
    match = _SIZE.fullmatch(str(limit))
    unit = match and UNITS.get(match.group(2).lower())
    return int(float(match.group(1)) * unit) if unit else None


def column_room(limit: str) -> int | None:
    """The most metric columns a table may have under ``limit`` (None: no bound known)."""
    size = limit_bytes(limit)
    return None if size is None else max(1, size // COLUMN_BYTES)


_NO_MEMORY = ("could not allocate", "failed to pin", "failed to allocate", "out of memory")


def out_of_memory(exc: BaseException) -> bool:
    """A failure that a smaller batch may avoid (DuckDB also reports one from COMMIT as a
    TransactionException: "Failed to commit: could not allocate block ...")."""
    if isinstance(exc, duckdb.OutOfMemoryException | MemoryError):
        return True
    return isinstance(exc, duckdb.Error) and any(s in str(exc).lower() for s in _NO_MEMORY)


def fatal(exc: BaseException) -> bool:
    """DuckDB invalidated the database (e.g. a checkpoint ran out of memory): every later
    statement fails until the process restarts."""
    return isinstance(exc, duckdb.FatalException) or "database has been invalidated" in str(exc)
