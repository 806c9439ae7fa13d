"""What a run's checkpoint saves leave on disk: saves cliffwatch infers, and the Hugging Face
Trainer's checkpoint copies of ``trainer_state.json`` read as the run's log.

A save is a folder or a weights file in or beside a run folder (issue 19). Each is a
``files`` row of kind ``save`` (its path the folder's or the file's), stored once: its one
event at offset 0 goes in with offset 1, in one transaction, and the weights are never
opened. The run is the folder that holds it, or that folder's parent when the folder is only
a container (``checkpoints/``, ``checkpoint/``)::

    out/checkpoint-500/                              run "out", step 500 (HF Trainer)
    outputs/checkpoint/step-1200/                    run "outputs", step 1200 (torchtitan)
    lightning_logs/version_0/checkpoints/epoch=3-step=1200.ckpt
                                                     run "lightning_logs/version_0", step 1200
    run7/model.pt                                    run "run7", placed by its time
        -> {"event": "checkpoint_end", "step": 500, "time": 1764633791.2, "inferred": true,
            "source": "folder checkpoint-500/ appeared at 2026-12-01 23:43:11 UTC"}

Files inside a save folder (``checkpoint-500/model.safetensors``, ``optimizer.pt``) are part
of that save, not saves of their own. A weights file with no step in its name is placed after
the last step the run logged before its modification time, once the run's log has lines at
or after that time (until then it is asked again at each look); a run whose lines carry no
time cannot place it (an ``info`` row says so once). A save whose run has no log (a folder of
downloaded weights) makes no run: it waits for one, looked at every tick while it is new (the
log of a live run is read within a tick or two), else at the sweep. An HF ``checkpoint-N/``
does not wait: the Trainer writes the trainer_state.json inside it last.

With ``report_to="none"`` the Trainer writes its state only into ``checkpoint-N/`` folders
until the end. Their ``trainer_state.json`` belong to the run of the output folder: the newest
is read, and each one that comes later goes on from the entries the one before had read
(``take_over``), so every entry is stored once; the final ``trainer_state.json`` beside them
is the newest of all.
"""

from __future__ import annotations

import copy
import math
import os
import re
import stat
import time
from pathlib import Path

from .filestate import FileState, grown
from .formats import detect
from .parse import Parsed, Problem
from .store import Batch, Store

KIND = "save"
# folders one save writes: HF checkpoint-500, torchtitan step-1200, Megatron iter_0001000,
# DeepSpeed global_step1000
FOLDER = re.compile(r"(?:checkpoint-|step-|iter_|global_step)(\d+)")
WEIGHTS = (".ckpt", ".pt", ".pth", ".safetensors")
CONTAINERS = frozenset({"checkpoints", "checkpoint", "ckpt", "ckpts"})
# a step written in a weights file's name: epoch=3-step=1200.ckpt, model_step1200.pt
STEP_IN_NAME = re.compile(r"(?:^|[^a-z])(?:step|iter|global_step|checkpoint|ckpt)[-=_]?(\d+)",
                          re.I)
FINAL = math.inf  # the rank of the trainer_state.json the Trainer writes at the end
RECENT_S = 600.0  # a save this new that waits is looked at every tick (tail.py's LIVE_S)
NO_TIME = ("the run's lines carry no time (a step in its name, such as model_step1200.pt, "
           "would place it)")


def inside(folder: str) -> bool:
    """Whether a folder (relative, "/"-separated) is, or is inside, a save folder."""
    return any(FOLDER.fullmatch(part) for part in folder.split("/") if part)


def is_save(name: str, is_dir: bool) -> bool:
    """Whether an entry of a folder that is no save folder is a save of its own."""
    return bool(FOLDER.fullmatch(name)) if is_dir else name.endswith(WEIGHTS)


def run_of(folder: str) -> str:
    """The run a save in ``folder`` belongs to."""
    parent, _, name = folder.rpartition("/")
    return (parent if name in CONTAINERS else folder) or "."


def step_of(name: str) -> int | None:
    match = FOLDER.fullmatch(name) or STEP_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def read(store: Store, state: FileState, path: str) -> bool:
    """Store a save's event once; nothing when stored already, gone, or not placed yet (its
    run has no log yet, or the log has not been read past the save's time). Returns whether
    to look again at every tick: a save made in the last RECENT_S that waits for its run's
    lines (older ones wait for the sweep)."""
    if state.offset or state.state != "ok":
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False  # gone before it was seen (save_total_limit): nothing to say of it
    name = path.rstrip("/").rpartition("/")[2]
    logs, before, latest, lines = store.db.run("ingest/save_place", {
        "run": state.run, "mtime": info.st_mtime}).fetchone()
    step, source = step_of(name), _source(name, info)
    recent = time.time() - info.st_mtime < RECENT_S
    # weights with no log beside them (a model folder) make no run; an HF checkpoint-N/ is
    # a run's whether or not its trainer_state.json is there yet (it is written last)
    if not logs and not detect.CHECKPOINT.fullmatch(name):
        return recent
    parsed = Parsed()
    if step is None and lines and (latest is None or before is None):
        parsed.problems.append(Problem(0, "info", f"{source}: not placed as a checkpoint save, "
                                       + (NO_TIME if latest is None else "before the first line")))
    elif step is None and (latest is None or latest < info.st_mtime):
        return recent  # the log has not been read past the save yet
    else:
        if step is None:
            step, source = before, f"{source}, after step {before} by the times of the run's lines"
        parsed.events.append((0, {"event": "checkpoint_end", "step": step, "inferred": True,
                                  "time": info.st_mtime, "source": source}))
    new = copy.copy(state)
    new.offset, new.inode, new.mtime = 1, info.st_ino, info.st_mtime
    new.grew_at = grown(state, info.st_mtime)  # its own time: an old save makes no run live
    store.commit(state, Batch(parsed, new))
    return False


def _source(name: str, info: os.stat_result) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(info.st_mtime))
    if stat.S_ISDIR(info.st_mode):
        return f"folder {name}/ appeared at {when}"
    return f"file {name} written at {when}"


def folders_from(state: Path) -> int | None:
    """The lowest step of the checkpoint-N folders in the output folder of a
    trainer_state.json (its own folder, or the one above its checkpoint folder), or None:
    saves from there on are said by those folders, each with its time; those before (deleted
    by save_total_limit before cliffwatch looked) only by save_steps. One listing of one
    folder per read of a state file (the Trainer rewrites it at each save)."""
    folder = state.parent.parent if detect.CHECKPOINT.fullmatch(state.parent.name) \
        else state.parent
    try:
        with os.scandir(folder) as entries:
            steps = [step_of(e.name) for e in entries if detect.CHECKPOINT.fullmatch(e.name)
                     and e.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    return min(steps, default=None)


def rank(path: str) -> float | None:
    """How new a run's trainer_state.json is: N for a checkpoint-N copy, FINAL for the one
    in the run folder; None for another file."""
    folder, _, name = path.rpartition("/")
    if name != detect.HF_STATE_NAME:
        return None
    parent = folder.rpartition("/")[2]
    return step_of(parent) if detect.CHECKPOINT.fullmatch(parent) else FINAL


def take_over(store: Store, files, state: FileState, new: FileState, real: Path
              ) -> str | None:
    """For a trainer_state.json read for the first time (on disk at ``real``): why it is not
    read (a newer one of its run is), or None. A copy that comes after others were read goes
    on from the entries the one read furthest had (``state`` and ``new`` take its count,
    attempt and last step, so ``hf_state`` skips those entries), and those others are read
    no more. The run's only state (no checkpoint-N/ folder beside it, the usual case) costs
    one listing of its folder, not a look at every tracked file."""
    mine = rank(state.path)
    if mine is None or state.lines or (mine == FINAL and folders_from(real) is None):
        return None
    peers = [f for f in files if f.run == state.run and f.path != state.path
             and f.kind == detect.HF_STATE and rank(f.path) is not None]
    newer = [f for f in peers if rank(f.path) > mine and f.state != "deleted"]
    if newer:
        newest = max(newer, key=lambda f: rank(f.path))
        return (f"a checkpoint's copy of its run's trainer_state.json; {newest.path} is newer "
                "and is read instead")
    read_before = [f for f in peers if f.lines]
    if not read_before:
        return None
    last = max(read_before, key=lambda f: f.lines)
    for target in (state, new):
        target.lines, target.attempt, target.last_step = last.lines, last.attempt, last.last_step
        target.tail = None
    for old in read_before:
        if old.state == "ok":
            _superseded(store, old, state.path)
    return None


def _superseded(store: Store, old: FileState, path: str) -> None:
    """An older copy, read: not read again (a deletion by save_total_limit says nothing)."""
    new = copy.copy(old)
    new.state = "skipped"
    note = Problem(0, "info", f"read up to step {old.last_step}; {path} goes on from there")
    store.record(old, new, note)
