"""``cliffwatch.init``: the run of this process, its rank, and how it ends.

``init`` opens the run folder (``logdir/name``, or ``logdir/project/name`` when a W&B-style
``project`` is given), writes run.json and ``run_start``, starts the system sampler, and makes
sure the run ends with ``run_end`` however the process ends: ``finish()``, an uncaught
exception (``sys.excepthook``), SIGTERM (after which the signal does what it did before), or
the interpreter exiting (``atexit``).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
from pathlib import Path

from .run import Run, as_dict, last_logged_step

# W&B's init arguments that mean nothing here: accepted, so a W&B script runs unchanged
WANDB_ONLY = {"entity", "tags", "notes", "group", "job_type", "mode", "reinit", "settings",
              "save_code", "anonymous", "magic", "sync_tensorboard", "monitor_gym",
              "allow_val_change", "config_exclude_keys", "config_include_keys", "force",
              "fork_from", "resume_from", "tensorboard", "dir"}
RESUME_WORDS = {"allow": True, "auto": True, "must": True, "never": False}


def _module():
    return sys.modules[__package__]


def env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def run_name(logdir: Path, world_size: int) -> str:
    """A readable unique name: the script's name and the time, as W&B's are readable.

    Under torchrun all ranks must agree without talking: the launcher's run id names it."""
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-c") else "run"
    if world_size > 1:
        rdzv = os.environ.get("TORCHELASTIC_RUN_ID", "none")
        tag = rdzv if rdzv != "none" else f"{os.environ.get('MASTER_PORT', '')}-{os.getppid()}"
        return f"{script}-{tag}"
    base = f"{script}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = base, 1
    while (logdir / name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def init(logdir: str | Path | None = None, name: str | None = None, config: object = None, *,
         resume: bool | int | str = False, system: bool = True, rank: int | None = None,
         world_size: int | None = None, all_ranks: bool = False, sample_s: float = 2.0,
         project: str | None = None, id: str | None = None,
         checkpoint: str | Path | None = None, started: float | None = None,
         **wandb_only: object) -> Run:
    """Start (or with ``resume``, continue) a run; returns it, also as ``cliffwatch.run``.

    ``resume``: True appends and records a resume event at the last step logged; an int
    is the step resumed from (a checkpoint's), ``checkpoint`` the file it came from.
    ``started``: the ``time.monotonic()`` ``elapsed_s`` counts from, when the attempt began
    before init (the bundled trainer's includes loading its target)."""
    unknown = set(wandb_only) - WANDB_ONLY
    if unknown:
        raise TypeError(f"cliffwatch.init() got unknown arguments {sorted(unknown)}; "
                        "docs/logging-api.md lists what it takes")
    logdir = Path(logdir if logdir is not None else os.environ.get("CLIFFWATCH_LOGDIR", "runs"))
    if project:
        logdir = logdir / project
    rank = env_int("RANK", 0) if rank is None else rank
    world_size = env_int("WORLD_SIZE", 1) if world_size is None else world_size
    name = name or id or run_name(logdir, world_size)
    if isinstance(resume, str):
        resume = RESUME_WORDS.get(resume, True)
    main_dir = logdir / name  # where rank{N}.jsonl goes
    if all_ranks and rank != 0:
        name = f"{name}-rank{rank}"  # a run of its own: two writers of one file mix steps
    finish_previous()
    run = Run(logdir / name, rank=rank, world_size=world_size, writes=rank == 0 or all_ranks,
              config=as_dict(config), name=f"{project}/{name}" if project else name,
              started=started, rank_dir=main_dir)
    _begin(run, resume, checkpoint)
    if system and env_int("LOCAL_RANK", rank) == 0:
        run.sampler = _start_sampler(run, sample_s)
    _watch(run)
    return run


def _begin(run: Run, resume: bool | int, checkpoint: str | Path | None) -> None:
    step = None
    if resume is not False:
        step = resume if type(resume) is int else last_logged_step(run.dir / "metrics.jsonl")
    run.start(resumed=step is not None, step=step or 0)
    if step is not None:
        run.resume(step, checkpoint)


def _start_sampler(run: Run, sample_s: float):
    try:
        from . import system
    except ImportError:  # cliffwatch/system.py not there (an older copy): sampling is off
        return None
    return system.start(run.dir, rank=run.rank, last_step=lambda: run.last_step,
                        sample_s=sample_s)


def log(values: dict, step: int | None = None, **kwargs) -> None:
    """``run.log`` of the run ``init`` started (W&B's ``wandb.log``)."""
    current = _module().run
    if current is None:
        raise RuntimeError("cliffwatch.log() before cliffwatch.init(): call "
                           "cliffwatch.init(logdir=..., name=...) first")
    current.log(values, step, **kwargs)


def finish(error: BaseException | str | None = None, **kwargs) -> None:
    """End the current run (run_end); nothing happens without one."""
    current = _module().run
    if current is not None:
        current.finish(error, **kwargs)


def finish_previous() -> None:
    """A second init() ends the first run, as W&B's reinit does."""
    finish()


# --- how the process ends -------------------------------------------------------------------

_hooked = False


def _watch(run: Run) -> None:
    module = _module()
    module.run, module.config, module.summary = run, run.config, run.summary
    global _hooked
    if _hooked:
        return
    _hooked = True
    previous_hook = sys.excepthook

    def excepthook(kind, value, tb):
        status = "interrupted" if issubclass(kind, KeyboardInterrupt) else None
        finish(value if value is not None else kind.__name__, status=status)
        previous_hook(kind, value, tb)

    sys.excepthook = excepthook
    atexit.register(finish)
    if threading.current_thread() is threading.main_thread():
        _on_sigterm()


def _on_sigterm() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:  # set from C code: cannot be chained from Python
        return

    def handler(signum, frame):
        if callable(previous):  # the program's own handler decides whether it ends
            try:
                previous(signum, frame)
            except BaseException:
                finish("SIGTERM", reason="sigterm")
                raise
            return
        if previous == signal.SIG_IGN:
            return
        finish("SIGTERM", reason="sigterm")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # then die of it, as before
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)
