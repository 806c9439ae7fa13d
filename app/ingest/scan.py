r"""Finding log files under a log directory and saying which run and kind each belongs to.

``runs/sweep3/lr1e-4/metrics.jsonl`` is ``LogFile(run="sweep3/lr1e-4", kind="metrics")``.
Folders starting with ``.`` (the monitor's own ``.cliffwatch/``) are never looked at. Other
trainers' files are found by name too (formats/detect.py: ``train_log.jsonl`` is ``jsonl``,
``trainer_state.json`` is ``hf_state``, ``main.log`` is ``text``, ``events.out.tfevents.*``
is ``tfevents``); whether they hold a log is decided on their bytes when read. A name that
is not valid UTF-8 (the folder ``b"caf\xe9"``) is stored readably as the run ``caf\xe9`` (a
backslash escape), and read from the folder on disk (``LogFile.real``). A name with a
backslash of its own is escaped too (the folder ``caf\xe9``, typed with a backslash, is the
run ``caf\\xe9``), so no two folders share a name.

Checkpoint saves are found in the same walk (saves.py): ``out/checkpoint-500/`` is
``LogFile(run="out", kind="save")``, and the ``trainer_state.json`` inside it is of the run
``out`` too, not of a run of its own. Looking at an entry's name costs no ``stat``, and no
folder is listed that was not listed before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import saves
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
    folder = "/".join(parts[:-1])
    if kind == detect.HF_STATE and len(parts) > 1 and detect.CHECKPOINT.fullmatch(parts[-2]):
        folder = "/".join(parts[:-2])  # a checkpoint's copy: the output folder's run
    run = readable(folder or ".")
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


def scan(logdir: Path, links_out: list[str] | None = None, known=frozenset(),
         top: str = "", refused: list[str] | None = None) -> list[LogFile]:
    """The log files under ``logdir`` (or only under its sub-folder ``top``), but not those in
    ``known`` (paths on disk, relative: they are not classified again). Folder links are not
    followed; those that lead out of the log directory are added to ``links_out`` (as stored
    names) to be reported, and folders that cannot be read to ``refused`` (see ``folders``)."""
    found: list[LogFile] = []
    parent, _, name = top.rpartition("/")
    if top and top not in known and not saves.inside(parent) and saves.is_save(name, True) \
            and os.path.isdir(os.path.join(logdir, top)):  # a save folder just created
        found.append(_save(parent, name))
    for folder, entries in folders(logdir, top, refused):
        found += in_folder(logdir, folder, entries, known, links_out)
    return found


def folders(logdir: Path, top: str = "", refused: list[str] | None = None):
    """Each folder under ``logdir/top`` (relative, "" for the log directory itself) with its
    entries, depth first, skipping folders that start with ``.``. One ``scandir`` per folder:
    an entry's type comes without a stat, so 10,000 run folders cost tens of milliseconds.
    A folder whose permissions refuse the listing is added to ``refused`` (relative paths on
    disk): the tailer says so once and tries it again every tick (issue 18)."""
    stack = [top]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(logdir, rel)) as found:
                entries = sorted(found, key=lambda e: e.name)
        except PermissionError:
            if refused is not None:
                refused.append(rel)
            continue
        except OSError:
            continue  # gone, or not a folder (any more): the files in it are followed anyway
        yield rel, entries
        stack += reversed([join(rel, e.name) for e in entries
                           if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)])


def in_folder(logdir: Path, rel: str, entries, known=frozenset(),
              links_out: list[str] | None = None) -> list[LogFile]:
    """The log files among one folder's entries that are not in ``known``."""
    found = []
    in_save = saves.inside(rel)  # once per folder: its weights are part of that save
    for entry in entries:
        path = join(rel, entry.name)
        if path in known:
            continue
        if entry.is_dir(follow_symlinks=False):
            if not in_save and saves.is_save(entry.name, True):
                found.append(_save(rel, entry.name))
            continue
        if not in_save and saves.is_save(entry.name, False) and not entry.is_symlink():
            found.append(_save(rel, entry.name))
            continue
        if _folder_link(entry):  # never followed
            if links_out is not None and not entry.name.startswith(".") \
                    and _leads_out(os.path.realpath(logdir), entry.path):
                links_out.append(readable(path))
            continue
        if kind_of(entry.name) is not None:
            item = classify(logdir, Path(logdir) / path)
            if item is not None:
                found.append(item)
    return found


def _save(folder: str, name: str) -> LogFile:
    path = join(folder, name)
    shown = readable(path)
    return LogFile(shown, readable(saves.run_of(folder)), saves.KIND,
                   None if shown == path else path)


def _folder_link(entry: os.DirEntry) -> bool:
    try:
        return entry.is_symlink() and entry.is_dir()
    except OSError:
        return False  # a link loop: a file to the tailer, which reports it


def join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name
