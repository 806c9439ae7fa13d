r"""Finding log files under a log directory and saying which run and kind each belongs to.

``runs/sweep3/lr1e-4/metrics.jsonl`` is ``LogFile(run="sweep3/lr1e-4", kind="metrics")``.
Folders starting with ``.`` (the monitor's own ``.cliffwatch/``) are never looked at. Readers
for other trainers' files plug in here by adding a name to ``KINDS``. A name that is not valid
UTF-8 (the folder ``b"caf\xe9"``) is stored readably as the run ``caf\xe9`` (a backslash
escape), and read from the folder on disk (``LogFile.real``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

KINDS = {"metrics.jsonl": "metrics", "events.jsonl": "events", "run.json": "run_meta"}
RANK_FILE = re.compile(r"rank(\d+)\.jsonl")


@dataclass(frozen=True)
class LogFile:
    path: str  # relative to the log directory, "/"-separated
    run: str
    kind: str  # metrics | events | rank | run_meta
    real: str | None = None  # the path on disk, when ``path`` had to escape non-UTF-8 bytes

    @property
    def rank(self) -> int | None:
        match = RANK_FILE.fullmatch(self.path.rsplit("/", 1)[-1])
        return int(match.group(1)) if match else None


def kind_of(name: str) -> str | None:
    if name in KINDS:
        return KINDS[name]
    return "rank" if RANK_FILE.fullmatch(name) else None


def classify(logdir: Path, path: Path) -> LogFile | None:
    """The LogFile for an absolute path, or None if the monitor does not read it."""
    try:
        rel = path.relative_to(logdir)
    except ValueError:
        return None
    parts = rel.parts
    kind = kind_of(parts[-1]) if parts else None
    if kind is None or any(p.startswith(".") for p in parts):
        return None
    run = readable("/".join(parts[:-1]) or ".")
    shown = readable(rel.as_posix())
    return LogFile(shown, run, kind, None if shown == rel.as_posix() else rel.as_posix())


def readable(name: str) -> str:
    """``name`` as stored and shown: bytes that are not UTF-8 (which ``os.fsdecode`` turns into
    lone surrogates, unstorable in DuckDB) written as backslash escapes (``\\xe9``)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


def scan(logdir: Path) -> list[LogFile]:
    found = []
    for folder, dirs, names in os.walk(logdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            item = classify(logdir, Path(folder) / name)
            if item is not None:
                found.append(item)
    return found
