"""cliffwatch: log what a training loop does, as log format v1, with the standard library only.

    import cliffwatch
    run = cliffwatch.init(logdir="runs", name="drafter-lr3e-4", config=cfg)  # run.json, run_start
    run.log({"loss": 0.81, "accuracy": 0.16}, step=2000)
    with run.checkpoint(step=2000, path=ckpt_dir):  # checkpoint_start / _end, seconds, bytes
        torch.save(state, ckpt_dir / "model.pt")
    run.epoch(2, step=4228)
    run.finish()  # run_end; an exception or SIGTERM records run_end with the error

``import cliffwatch as wandb`` runs a W&B-style script (``wandb.init``, ``wandb.log``,
``wandb.config.lr``, ``wandb.summary["x"] = 1``, ``wandb.finish``); docs/logging-api.md says
what each call writes.

Installed, this package also holds the monitor: the checkout's app/, trainer/, queries/ and
the demo's sample become ``cliffwatch.app``, ``cliffwatch.trainer``, ``cliffwatch.queries`` and
``cliffwatch.samples`` (setup.py), so ``pip install`` adds no generic top-level name such as
``app``. ``pip install cliffwatch`` is the logging API alone, with no dependency;
``pip install "cliffwatch[monitor]"`` adds what the ``cliffwatch`` command (the monitor) needs.
A checkout runs the monitor as ``python -m app``.
"""

from __future__ import annotations

from .run import Config, Run  # the import sets cliffwatch.run to the module: reset below
from .session import finish, init, log

run: Run | None = None  # the run of the last init(), as wandb.run
config: Config = Config()  # the current run's config (init replaces it)
summary: Config = Config()

__all__ = ["Config", "Run", "config", "finish", "init", "log", "run", "summary"]
