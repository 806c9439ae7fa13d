"""`export --to DIR`: write the log directory's tables to a Parquet archive, Hive-partitioned
by run, adding only what is new since the last export (docs/export.md)::

    $ python -m app export --logdir runs --to /data/cliffwatch
    metrics      1000000 rows    1 run     1 file    25.2 MiB
    events            12 rows    1 run     1 file     4.1 KiB
    incidents          3 rows    1 run     1 file     6.0 KiB
    exported to /data/cliffwatch from the server at http://127.0.0.1:8501 in 3.7 s
"""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import CliffwatchError
from ..export import layout
from ..export.archive import export
from ..export.source import open_source
from ..export.tables import TABLES
from ..units import binary


def export_command(logdir: Path, db: Path | None, dest: Path, settings) -> int:
    dest = _check_dest(Path(logdir), Path(dest))
    started = time.monotonic()
    with open_source(logdir, db, settings) as source:
        summary = export(source, dest)
        where = source.where
    for name, written in summary.tables.items():
        if written.runs:
            print(f"{name:<10}{written.rows:>10} rows {_count(written.runs, 'run')} "
                  f"{_count(written.files, 'file')} {binary(written.bytes):>10}")
    if not summary.files:
        print("nothing new since the last export")
    print(f"exported to {dest} from {where} in {time.monotonic() - started:.1f} s")
    for run in summary.too_long:
        print(f"not exported: run {run!r}: its partition folder name "
              f"({layout.partition(run)!r}) is over {layout.NAME_MAX} bytes; shorten the run's "
              "folder names")
    return 1 if summary.too_long else 0


def _check_dest(logdir: Path, dest: Path) -> Path:
    """The archive folder, refused inside the log directory (the monitor would scan and watch
    every partition folder) and refused when it holds files that are not an archive's."""
    dest, logs = dest.resolve(), logdir.resolve()
    if dest == logs or logs in dest.parents:
        raise CliffwatchError(f"--to {dest} is inside the log directory {logs}, which the "
                              "monitor scans; pass a folder outside it")
    ours = {t.name for t in TABLES} | {layout.MANIFEST, layout.LOCK}
    if dest.is_dir() and not (dest / layout.MANIFEST).exists():
        others = sorted(p.name for p in dest.iterdir()
                        if p.name not in ours and not p.name.startswith(f".{layout.MANIFEST}"))
        if others:
            raise CliffwatchError(f"--to {dest} holds other files ({', '.join(others[:3])}) "
                                  "and no cliffwatch archive; pass an empty or new folder")
    elif dest.exists() and not dest.is_dir():
        raise CliffwatchError(f"--to {dest} is a file; pass a folder (it is created if "
                              "missing)")
    return dest


def _count(n: int, noun: str) -> str:
    return f"{n:>4} {noun}{'s' if n != 1 else ' '}"


