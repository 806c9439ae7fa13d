"""Checkpoints: blocking or async saves, throttled storage, atomic rename, keep the newest K.

Files are `OUT/ckpt/step-<N>.pt`. A save writes `.step-<N>.pt.tmp`, fsyncs it, renames it into
place (atomic on POSIX) and fsyncs the folder, so a reader sees no file or a whole one.

- `blocking`: the loop serialises and writes; it is blocked for the whole save.
- `async`: the loop copies the state to CPU memory (and first waits for a previous save still
  in flight), then a background thread serialises, writes, fsyncs and renames.

`--storage-mbps X` is a *simulation* of slow network storage: writes go out in 256 KiB chunks
and the writer sleeps so the average rate stays at X MB/s (10^6 bytes/s). Both modes log

    {"event": "checkpoint_end", "step": 200, "duration_s": 9.1, "blocked_s": 9.1, "bytes": ...}
"""

from __future__ import annotations

import io
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .errors import TrainerError

CHUNK = 256 * 1024  # bytes per throttled write
NAME = re.compile(r"^step-(\d+)\.pt$")


def checkpoint_path(out: Path, step: int) -> Path:
    return out / "ckpt" / f"step-{step}.pt"


def list_checkpoints(out: Path) -> list[tuple[int, Path]]:
    """(step, path) of finished checkpoints in OUT/ckpt, oldest first (temp files ignored)."""
    folder = out / "ckpt"
    found = [(NAME.match(p.name), p) for p in folder.iterdir()] if folder.is_dir() else []
    return sorted((int(m[1]), p) for m, p in found if m)


def find_checkpoint(spec: str, out: Path) -> Path:
    """The file `--resume` names: 'latest' (in --out), a run folder, or a checkpoint file."""
    path = out if spec == "latest" else Path(spec)
    if path.is_file():
        return path
    found = list_checkpoints(path)
    if not found:
        raise TrainerError(
            f"--resume {spec}: no checkpoint in {path / 'ckpt'}; run without --resume, or "
            "save some with --ckpt-every N"
        )
    return found[-1][1]


def snapshot(obj: object) -> object:
    """A deep copy whose tensors are detached CPU clones (what an async save may keep)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: snapshot(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(snapshot(v) for v in obj)
    return obj


def write_file(data: bytes, path: Path, mbps: float) -> None:
    """Write, fsync and atomically rename; at `mbps` MB/s on average when mbps > 0."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    started = time.monotonic()
    with tmp.open("wb") as handle:
        for offset in range(0, len(data), CHUNK):
            handle.write(data[offset : offset + CHUNK])
            if mbps > 0:
                due = (offset + CHUNK) / (mbps * 1e6) - (time.monotonic() - started)
                time.sleep(max(0.0, due))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # make the rename itself durable
    finally:
        os.close(folder)


def serialize(state: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def prune(out: Path, keep: int) -> None:
    for _, path in list_checkpoints(out)[:-keep]:
        path.unlink(missing_ok=True)


class Saver:
    """Saves checkpoints in `mode`; `on_event(kind, step, **extra)` receives the log events."""

    def __init__(self, out: Path, mode: str, mbps: float, keep: int, on_event: Callable) -> None:
        self.out, self.mode, self.mbps, self.keep = out, mode, mbps, keep
        self.on_event = on_event
        self.pending: threading.Thread | None = None
        self.error: BaseException | None = None

    def save(self, state: dict, step: int) -> float:
        """Start (async) or do (blocking) a save of `state`; returns seconds the caller waited."""
        started = time.monotonic()
        path = checkpoint_path(self.out, step)
        self.on_event("checkpoint_start", step, path=str(path))
        if self.mode == "blocking":
            self._write(state, step, path, started, None)
            return time.monotonic() - started
        self.wait()  # one save at a time: a new save waits for the previous one
        copy = snapshot(state)
        blocked = time.monotonic() - started
        self.pending = threading.Thread(
            target=self._write, args=(copy, step, path, started, blocked), name="ckpt-writer"
        )
        self.pending.start()
        return blocked

    def _write(self, state, step: int, path: Path, started: float, blocked) -> None:
        try:
            data = serialize(state)
            write_file(data, path, self.mbps)
            prune(self.out, self.keep)
        except BaseException as exc:
            self.error = exc
            return
        duration = time.monotonic() - started
        self.on_event(
            "checkpoint_end", step, path=str(path), duration_s=round(duration, 4),
            blocked_s=round(duration if blocked is None else blocked, 4), bytes=len(data),
        )  # fmt: skip

    def wait(self) -> None:
        """Block until no save is in flight; re-raise a failed background save."""
        if self.pending is not None:
            self.pending.join()
            self.pending = None
        if self.error is not None:
            error, self.error = self.error, None
            raise RuntimeError("saving a checkpoint failed") from error


def trained_tensors(path: Path) -> list[torch.Tensor]:
    """A checkpoint's drafter parameters and optimizer state, in a fixed order: what an exact
    resume must give again (tests/trainer/test_trainer_resume.py, bench/gpu_resume.py)."""
    saved = load_checkpoint(path)
    return _tensors({"drafter": saved["drafter"], "optimizer": saved["optimizer"]["state"]})


def _tensors(tree) -> list[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        return [t for key in sorted(tree) for t in _tensors(tree[key])]
    return []


def load_checkpoint(path: Path) -> dict:
    try:
        # our own file: it holds Python and NumPy RNG states, hence weights_only=False
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise TrainerError(f"--resume: cannot read checkpoint {path}: {exc}") from None
