"""Which column a log key is stored in: the one rule, stated here once, that both parse paths
(careful.py line by line, fast.py through DuckDB's reader) and the store follow.

DuckDB matches identifiers ignoring ASCII case only (measured on DuckDB 2.0: ``"LOSS"`` finds a
column ``loss``, ``"ÉNERGIE"`` finds ``Énergie``, but ``Énergie`` and ``énergie`` are two
columns, and so are ``k`` and the Kelvin sign ``K``). So the monitor compares names the same
way (``fold``), never with Python's ``str.lower()``, which folds all of Unicode. Examples::

    loss       -> loss          a plain key is its own column: SELECT loss FROM metrics
    Loss       -> Loss          the same column as loss (names equal under fold share it)
    buckets    -> buckets       a special key, spelled exactly, keeps its type (INTEGER[])
    Buckets    -> log_Buckets   any other spelling of a special or reserved name is a metric
    run        -> log_run       the monitor's own columns, and the overflow column
    ""         -> log_
    "a\\u0000b" -> a\\u0000b      a control character (or a lone surrogate) as its JSON escape

Every column but the special ones is DOUBLE, so two keys that end in one column can only
meet on the same line; the second is then ignored with a warning (parse.py). Keys beyond
``max_metric_columns`` are kept in the MAP(VARCHAR, DOUBLE) column ``extra_metrics`` under
their column name (store.py).
"""

from __future__ import annotations

import functools
import re

# the special keys and the Arrow type each keeps (parse.py builds it: no pyarrow import here)
SPECIAL = {"step": "int64", "elapsed_s": "float64", "time": "float64", "epoch": "float64",
           "buckets": "list<int32>"}
OVERFLOW = "extra_metrics"  # MAP(VARCHAR, DOUBLE): metrics past the column cap
# The monitor's own columns (and DuckDB's rowid); a key that folds to one gets the prefix.
RESERVED = {"run", "attempt", "file_id", "ingested_at", "rank", "rowid", "line_id", "kind",
            OVERFLOW}
PREFIX = "log_"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# C0 and C1 controls, DEL, and lone surrogates (json.loads lets "\ud800" through): pyarrow
# cuts a field name at NUL, and a surrogate cannot be encoded as UTF-8 at all.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


@functools.lru_cache(maxsize=1 << 16)  # called per key per line: the same few names
def fold(name: str) -> str:
    """A name as DuckDB compares identifiers: ASCII letters lowered, nothing else."""
    return name.translate(_ASCII_LOWER)


_TAKEN = frozenset(fold(n) for n in SPECIAL.keys() | RESERVED)


@functools.lru_cache(maxsize=1 << 16)
def column_name(key: str) -> str:
    """The column ``key`` is stored in (see the module docstring)."""
    if key in SPECIAL:
        return key
    name = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", key)
    if not name or fold(name) in _TAKEN:
        return PREFIX + name
    return name


def is_metric_column(name: str) -> bool:
    """A column that holds a metric key and counts toward ``max_metric_columns``."""
    return fold(name) not in _TAKEN
