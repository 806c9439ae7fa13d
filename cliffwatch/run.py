"""One run's log folder, written as log format v1 (docs/log-format.md).

``Run`` is what ``cliffwatch.init`` returns. Rank 0 writes ``metrics.jsonl``, ``events.jsonl``
and ``run.json``; with several processes every rank also writes ``rank{N}.jsonl``. Files are
opened for append, so a resumed run adds a new attempt. A metrics line::

    {"step": 40, "loss": 2.31, "accuracy": 0.42, "epoch": 0, "buckets": [3, 0, 5, 1],
     "elapsed_s": 12.503, "time": 1795939200.12}
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from .writer import LineFile, Problems, write_json

FORMAT = "cliffwatch/1"
NUMBER = (float, int)  # the values a line takes as they are (the fast path)


class Config(dict):
    """A dict whose keys read as attributes too (``config.lr``), as W&B's does; a change
    calls ``on_change`` (the run rewrites run.json)."""

    def __init__(self, *args, on_change: Callable[[], None] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "_on_change", on_change)

    def __getattr__(self, key: str):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"config has no key {key!r}") from None

    def __setattr__(self, key: str, value) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        del self[key]

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._changed()

    def update(self, *args, allow_val_change: bool = True, **kwargs) -> None:
        # W&B's keyword, accepted: values may always change here
        super().update(*args, **kwargs)
        self._changed()

    def setdefaults(self, values: dict) -> None:  # W&B's name
        for key, value in values.items():
            super().setdefault(key, value)
        self._changed()


def as_dict(config: object) -> dict:
    """A config as init takes it: a dict, an argparse Namespace, a dataclass, or None."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    if hasattr(config, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(config)
    if hasattr(config, "__dict__"):
        return dict(vars(config))
    raise TypeError(f"config must be a dict, a dataclass or an argparse Namespace, got "
                    f"{type(config).__name__}")


def last_logged_step(path: Path) -> int | None:
    """The step of the last whole line of a metrics file (read from its end)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            tail = handle.read()
    except OSError:
        return None
    for raw in reversed(tail.split(b"\n")[1:] if len(tail) == 65536 else tail.split(b"\n")):
        try:
            step = json.loads(raw).get("step")
        except (ValueError, AttributeError):
            continue
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None


def size_of(path: Path | str | None) -> int | None:
    """Bytes of a file, or of every file under a folder; None when it is not there."""
    if path is None:
        return None
    path = Path(path)
    try:
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    except OSError:
        pass
    return None


class Run:
    """Writes one run folder; every method is safe across threads and never raises for I/O."""

    def __init__(self, run_dir: Path, *, rank: int = 0, world_size: int = 1,
                 writes: bool = True, config: dict | None = None,
                 name: str | None = None, started: float | None = None,
                 rank_dir: Path | None = None) -> None:
        self.dir, self.rank, self.world_size = Path(run_dir), rank, world_size
        self.name = name or self.dir.name  # the run id: its folder's path under the logdir
        self.problems = Problems()
        self.last_step: int | None = None
        self.finished = False
        # elapsed_s counts from here: this attempt's start
        self._started = time.monotonic() if started is None else started
        self._writes = writes  # metrics, events and run.json (rank 0, or all_ranks)
        self._json: dict = {}
        self._open_saves: dict[int, float] = {}  # checkpoint step -> monotonic start
        self._pending: dict = {}  # log(commit=False) values waiting for their step's line
        self._lock = threading.RLock()  # a SIGTERM handler may finish while it is held
        self.config = Config(config or {}, on_change=self._write_run_json)
        self.summary = Config(on_change=None)
        self.sampler = None
        self._metrics = LineFile(self.dir / "metrics.jsonl", self.problems) if writes else None
        self._events = LineFile(self.dir / "events.jsonl", self.problems) if writes else None
        rank_dir = self.dir if rank_dir is None else Path(rank_dir)  # all_ranks: the main run's
        self._rank = (LineFile(rank_dir / f"rank{rank}.jsonl", self.problems)
                      if world_size > 1 else None)

    # --- lines ------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since this attempt started (the ``elapsed_s`` of every line)."""
        return round(time.monotonic() - self._started, 3)

    def log(self, values: dict, step: int | None = None, *, buckets: list[int] | None = None,
            epoch: int | float | None = None, commit: bool | None = None) -> None:
        """One metrics.jsonl line; ``step`` None is the last step + 1 (W&B's rule).

        ``commit=False`` (W&B's) keeps the values for the next line of the same step."""
        if step is None:
            step = self._next_step(values)
        if self._pending:
            pending, self._pending = self._pending, {}
            if pending["step"] == step:
                values = {**pending["values"], **values}
            else:
                self._line(pending["step"], pending["values"], None, None)
        if commit is False:
            self._pending = {"step": step, "values": dict(values)}
            return
        self._line(step, values, epoch, buckets)

    def _next_step(self, values: dict) -> int:
        if self._pending:
            return self._pending["step"]
        given = values.get("step")  # {"step": 5, ...}, as some W&B scripts log it
        if type(given) is int:
            return given
        return 0 if self.last_step is None else self.last_step + 1

    def _line(self, step: int, values: dict, epoch, buckets) -> None:
        if not all(type(v) in NUMBER for v in values.values()):
            values = self._numbers(values)
        line = {"step": step, **values}
        if "step" in values:  # the argument's step wins over a logged "step" value
            line["step"] = step
        if epoch is not None:
            line["epoch"] = epoch
        if buckets is not None:
            line["buckets"] = list(buckets)
        self.last_step = step
        if self._metrics is not None:
            line["elapsed_s"] = round(time.monotonic() - self._started, 3)
            line["time"] = time.time()
            self._metrics.add(line)

    def _numbers(self, values: dict, prefix: str = "") -> dict:
        """Values as the format takes them: numbers (a tensor or numpy scalar as a float),
        nested dicts as ``a/b`` keys; anything else is left out, said once per key."""
        kept = {}
        for key, value in values.items():
            name = f"{prefix}{key}"
            if value is None or type(value) in NUMBER or key in ("buckets", "epoch"):
                kept[name] = value
            elif isinstance(value, bool):
                kept[name] = int(value)
            elif isinstance(value, dict):
                kept.update(self._numbers(value, f"{name}/"))
            else:
                try:
                    kept[name] = float(value)
                except (TypeError, ValueError):
                    self.problems.say(f"value {name}", f"{name!r} is a {type(value).__name__}, "
                                      "not a number: log format v1 keeps numbers, so it is "
                                      "left out")
        return kept

    def event(self, kind: str, step: int | None = None, /, **data: object) -> None:
        """Any event line in events.jsonl (``step`` None: the last step logged, or 0)."""
        if self._events is None:
            return
        if step is None:
            step = self.last_step or 0
        line = {"event": kind, "step": step, **data}
        line["elapsed_s"] = round(time.monotonic() - self._started, 3)
        line["time"] = time.time()
        self._events.add(line)

    def rank_line(self, step: int, **values: object) -> None:
        """This rank's rank{N}.jsonl line (step_time_s, data_wait_s, ...): only written when
        the run has several processes, as the format asks."""
        if self._rank is not None:
            line = {"step": step, "rank": self.rank, **values, "elapsed_s": self.elapsed()}
            self._rank.add(line)

    # --- what the loop was doing ------------------------------------------------------------

    def epoch(self, epoch: int, step: int | None = None) -> None:
        self.event("epoch_start", step, epoch=epoch)

    def resume(self, step: int, checkpoint: str | Path | None = None) -> None:
        """The run restarted from ``step`` (a checkpoint's, or the last one logged)."""
        self.last_step = step
        self.event("resume", step, from_step=step,
                   checkpoint=None if checkpoint is None else str(checkpoint))

    def checkpoint_start(self, step: int, path: str | Path | None = None, **data) -> None:
        with self._lock:
            self._open_saves[step] = time.monotonic()
        self.event("checkpoint_start", step, path=None if path is None else str(path), **data)

    def checkpoint_end(self, step: int, path: str | Path | None = None,
                       blocked_s: float | None = None, **data) -> None:
        """``duration_s`` from the matching checkpoint_start; ``blocked_s`` is the time the
        loop waited (the whole save unless given: an async save passes its own)."""
        with self._lock:
            began = self._open_saves.pop(step, None)
        duration = data.pop("duration_s", None)
        if duration is None and began is not None:
            duration = round(time.monotonic() - began, 4)
        if blocked_s is None:
            blocked_s = duration
        size = data.pop("bytes", None)
        self.event("checkpoint_end", step, path=None if path is None else str(path),
                   duration_s=duration, blocked_s=blocked_s,
                   bytes=size_of(path) if size is None else size, **data)

    @contextmanager
    def checkpoint(self, step: int, path: str | Path | None = None) -> Iterator[None]:
        """``with run.checkpoint(step, path=ckpt_dir): torch.save(...)``: start and end
        events around the save, with its seconds and the bytes under ``path``."""
        self.checkpoint_start(step, path)
        try:
            yield
        except BaseException as exc:
            self.checkpoint_end(step, path, error=f"{type(exc).__name__}: {exc}")
            raise
        self.checkpoint_end(step, path)

    # --- run.json and the end ---------------------------------------------------------------

    def describe(self, **fields: object) -> None:
        """Add keys to run.json (``buckets``, ``steps_per_epoch``, ...) and rewrite it."""
        self._json.update(fields)
        self._write_run_json()

    def _write_run_json(self) -> None:
        if not self._writes:
            return
        doc = {"format": FORMAT, "run_id": self.name,
               "started_at": self._json.get("started_at"), "config": dict(self.config),
               **self._json, "world_size": self.world_size}
        if self.finished and self.summary:
            doc["summary"] = dict(self.summary)
        write_json(self.dir / "run.json", doc, self.problems)

    def start(self, *, resumed: bool, step: int) -> None:
        """run.json, then the run_start event (init calls it)."""
        self._json["started_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._write_run_json()
        self.event("run_start", step, resumed=resumed)

    def finish(self, error: BaseException | str | None = None, *, status: str | None = None,
               reason: str | None = None, step: int | None = None) -> None:
        """The run_end event, once: ``{"reason": "finished"|"error"|"sigterm",
        "status": "completed"|"failed"|"interrupted", "error": "..."}``; the summary goes
        into run.json and the sampler stops."""
        with self._lock:
            if self.finished:
                return
            self.finished = True
        if reason is None:
            reason = "error" if error is not None else "finished"
        if status is None:
            status = {"finished": "completed", "sigterm": "interrupted"}.get(reason, "failed")
        data: dict = {"status": status, "reason": reason}
        if error is not None:
            data["error"] = error if isinstance(error, str) else \
                f"{type(error).__name__}: {error}"
        if self._pending:
            pending, self._pending = self._pending, {}
            self._line(pending["step"], pending["values"], None, None)
        self._stop_sampler()
        self.event("run_end", (self.last_step or 0) if step is None else step, **data)
        if self.summary:
            self._write_run_json()
        for handle in (self._metrics, self._events, self._rank):
            if handle is not None:
                handle.close()

    def _stop_sampler(self) -> None:
        sampler, self.sampler = self.sampler, None
        if sampler is not None:
            try:
                sampler.stop()
            except Exception as exc:  # a sampler's bug must not lose the run_end line
                self.problems.say("sampler", f"the system sampler failed to stop ({exc})")

