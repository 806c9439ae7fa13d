r"""Finding log files under a log directory and saying which run and kind each belongs to.

``runs/sweep3/lr1e-4/metrics.jsonl`` is ``LogFile(run="sweep3/lr1e-4", kind="metrics")``.
Folders starting with ``.`` (the monitor's own ``.cliffwatch/``) are never looked at. Other
trainers' files are found by name too (formats/detect.py: ``train_log.jsonl`` is ``jsonl``,
``trainer_state.json`` is ``hf_state``, ``main.log`` is ``llmc``, ``events.out.tfevents.*``
is ``tfevents``); whether they hold a log is decided on their bytes when read. A name that
is not valid UTF-8 (the folder ``b"caf\xe9"``) is stored readably as the run ``caf\xe9`` (a
backslash escape), and read from the folder on disk (``LogFile.real``). A name with a
backslash of its own is escaped too (the folder ``caf\xe9``, typed with a backslash, is the
run ``caf\\xe9``), so no two folders share a name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .formats import detect


@dataclass(frozen=True)
class LogFile:
    path: str  # relative to the log directory, "/"-separated
    run: str
    kind: str  # metrics | events | rank | run_meta, or a foreign format (formats/detect.py)
    real: str | None = None  # the path on disk, when ``path`` had to escape non-UTF-8 bytes

    @property
    def rank(self) -> int | None:
        match = detect.RANK_FILE.fullmatch(self.path.rsplit("/", 1)[-1])
        return int(match.group(1)) if match else None


def kind_of(name: str) -> str | None:
    return detect.by_name(name)


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
    lone surrogates, unstorable in DuckDB) written as backslash escapes (``\\xe9``), after
    doubling any backslash of the name's own; so the mapping is one to one: a stored name with
    no backslash is the name on disk, one with a backslash was escaped."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if "\\" not in name:
            return name
    escaped = name.replace("\\", "\\\\")
    return escaped.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _leads_out(root: str, path: str) -> bool:
    if not os.path.islink(path):
        return False
    real = os.path.realpath(path)
    return real != root and not real.startswith(root.rstrip("/") + "/")


def scan(logdir: Path, links_out: list[str] | None = None) -> list[LogFile]:
    """The log files under ``logdir``. Folder links are not followed; those that lead out of
    the log directory are added to ``links_out`` (as stored names) to be reported."""
    found, root = [], os.path.realpath(logdir)
    for folder, dirs, names in os.walk(logdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if links_out is not None:
            links_out += [readable(os.path.relpath(os.path.join(folder, d), logdir))
                          for d in dirs if _leads_out(root, os.path.join(folder, d))]
        for name in sorted(names):
            item = classify(logdir, Path(folder) / name)
            if item is not None:
                found.append(item)
    return found
