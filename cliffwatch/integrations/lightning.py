"""A ``lightning.pytorch`` Callback that writes log format v1::

    from cliffwatch.integrations.lightning import CliffwatchCallback
    trainer = lightning.pytorch.Trainer(..., callbacks=[CliffwatchCallback(logdir="runs")])

Every ``log_every_n_steps`` optimizer steps a ``metrics.jsonl`` line holds the training step's
loss, the first optimizer's ``lr`` and what the module logged with ``self.log`` (``*_epoch``
aggregates and validation metrics left out); ``events.jsonl`` gets::

    {"event": "epoch_start", "step": 1, "epoch": 0, ...}
    {"event": "eval_start", "step": 20, ...}
    {"event": "eval_end", "step": 20, "duration_s": 0.05, ...}
    {"event": "checkpoint_start", "step": 20, "path": "ckpt/epoch=0-step=20.ckpt", ...}
    {"event": "checkpoint_end", "step": 20, "blocked_s": 3.01, "bytes": 5123, ...}
    {"event": "run_end", "step": 40, "status": "failed", "error": "RuntimeError: ...", ...}

A save's seconds are its own: the callback wraps the strategy's ``save_checkpoint`` (the
CheckpointIO's write and whatever the strategy does around it), so nothing a hook does before
or after it is counted. A crash reaches ``on_exception``, which ends the run with its error.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback

import cliffwatch
from cliffwatch.session import run_name

from . import is_eval_name, numbers


class CliffwatchCallback(Callback):
    """``logdir``, ``name``, ``config`` and ``init_kwargs`` go to ``cliffwatch.init``. Give a
    ``name`` to resume into the same run (``fit(ckpt_path=...)`` in a later launch); without
    one each launch is a run of its own. ``run``: an open ``cliffwatch`` run to write to."""

    def __init__(self, logdir: str | Path = "runs", name: str | None = None,
                 config: dict | None = None, *, run=None, **init_kwargs):
        self.logdir, self.name, self.config = logdir, name, config
        self.init_kwargs, self.run = init_kwargs, run
        self._ours = run is None  # a run this callback opened is finished when fit ends
        self._stepped = (0, 0.0)  # the last optimizer step seen, and its monotonic time
        self._mark = 0.0  # monotonic time of the last hook (or save) of ours that ended
        self._waited = 0.0  # this optimizer step's seconds from a mark to a batch's start
        self._eval_keys: set[str] = set()  # what validation logs: no training metric
        self._eval_started: float | None = None
        self._before_eval: dict = {}  # trainer.callback_metrics when the pass began
        self._unwrap = None  # puts the strategy's own save_checkpoint back

    # -- the run ----------------------------------------------------------------------------

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self._wrap_saves(trainer)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        if self._unwrap is not None:
            self._unwrap()
            self._unwrap = None

    def on_train_start(self, trainer, pl_module) -> None:
        step = trainer.global_step  # above 0: fit(ckpt_path=...) restored a checkpoint
        checkpoint = str(trainer.ckpt_path) if step > 0 and trainer.ckpt_path else None
        if self.run is None:
            self.run = cliffwatch.init(
                logdir=self.logdir, name=self._name(trainer),
                config=self._config(trainer, pl_module),
                resume=step if step > 0 else False, checkpoint=checkpoint,
                rank=trainer.global_rank, world_size=trainer.world_size, **self.init_kwargs)
        elif step > 0:
            self.run.resume(step, checkpoint)
        self._stepped = (step, time.monotonic())
        self._mark, self._waited = self._stepped[1], 0.0

    def _name(self, trainer) -> str | None:
        """The run's name; with several processes, rank 0's (each rank would pick its own
        from its clock and process ids): all ranks call on_train_start, so they can agree."""
        if self.name is not None or trainer.world_size == 1:
            return self.name
        return trainer.strategy.broadcast(run_name(Path(self.logdir), 1))

    def _config(self, trainer, pl_module) -> dict:
        hparams = dict(getattr(pl_module, "hparams", {}) or {})
        return {**hparams, "max_steps": trainer.max_steps, "max_epochs": trainer.max_epochs,
                "accumulate_grad_batches": trainer.accumulate_grad_batches,
                **(self.config or {})}

    def on_train_end(self, trainer, pl_module) -> None:
        if self._ours and self.run is not None:
            self.run.finish()
            self.run = None

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if self._ours and self.run is not None:  # a run of yours: cliffwatch's hook ends it
            interrupted = isinstance(exception, KeyboardInterrupt)
            self.run.finish(exception, status="interrupted" if interrupted else None)
            self.run = None
        self.teardown(trainer, pl_module, "fit")  # Lightning calls no teardown hook after it

    # -- what the loop does -----------------------------------------------------------------

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self.run is not None:  # the epoch's first batch is the next step's
            self.run.epoch(trainer.current_epoch, step=trainer.global_step + 1)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._waited += time.monotonic() - self._mark  # Lightning fetched it since the mark

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._mark = time.monotonic()
        step = trainer.global_step
        if self.run is None or step == self._stepped[0]:
            return  # several batches share one optimizer step under gradient accumulation
        self._rank_line(step)
        if step % (trainer.log_every_n_steps or 1):
            return
        values = {k: v for k, v in numbers(dict(trainer.callback_metrics)).items()
                  if k not in self._eval_keys and not k.endswith("_epoch")}
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        values = {**numbers({"loss": loss}), **values}  # a "loss" the module logged wins
        if trainer.optimizers:
            values.setdefault("lr", trainer.optimizers[0].param_groups[0]["lr"])
        self.run.log(values, step=step, epoch=trainer.current_epoch)

    def _rank_line(self, step: int) -> None:
        """This rank's seconds per optimizer step (rank{N}.jsonl, written with several
        processes only), for the monitor's straggler check."""
        now = time.monotonic()
        seconds = (now - self._stepped[1]) / (step - self._stepped[0])
        self.run.rank_line(step, step_time_s=round(seconds, 4),
                           data_wait_s=round(self._waited, 4))
        self._stepped, self._waited = (step, now), 0.0

    def on_validation_start(self, trainer, pl_module) -> None:
        if self.run is None or trainer.sanity_checking:
            return
        self._eval_started = time.monotonic()
        self._before_eval = dict(trainer.callback_metrics)
        self.run.event("eval_start", trainer.global_step)

    def on_validation_end(self, trainer, pl_module) -> None:
        self._mark = time.monotonic()
        if self.run is None or self._eval_started is None:
            return
        seconds = time.monotonic() - self._eval_started
        self._eval_started = None
        # what this pass logged: the metrics it computed are new tensors (a value equal to
        # the last pass's is logged again), the training step's are the ones seen before
        changed = numbers({k: v for k, v in trainer.callback_metrics.items()
                           if self._before_eval.get(k) is not v})
        self._eval_keys.update(changed)
        values = {(k if is_eval_name(k) else f"val_{k}"): v for k, v in changed.items()}
        step = trainer.global_step
        self.run.event("eval_end", step, duration_s=round(seconds, 4))
        if values:  # val_* names: the monitor's readers keep them apart from training
            self.run.log(values, step=step, epoch=trainer.current_epoch)

    # -- saves ------------------------------------------------------------------------------

    def _wrap_saves(self, trainer) -> None:
        """Time the strategy's own save: ``Trainer.save_checkpoint`` (what ModelCheckpoint
        calls) dumps the state, then hands it to ``strategy.save_checkpoint``."""
        strategy = trainer.strategy
        save = strategy.save_checkpoint

        @functools.wraps(save)
        def timed(checkpoint, filepath, *args, **kwargs):
            if self.run is None:
                return save(checkpoint, filepath, *args, **kwargs)
            step = trainer.global_step
            self.run.checkpoint_start(step, path=filepath)
            began = time.monotonic()
            try:
                result = save(checkpoint, filepath, *args, **kwargs)
            except BaseException as exc:
                self.run.checkpoint_end(step, path=filepath, error=f"{type(exc).__name__}: "
                                        f"{exc}")
                raise
            self.run.checkpoint_end(step, path=filepath,
                                    blocked_s=round(time.monotonic() - began, 4))
            self._mark = time.monotonic()  # ModelCheckpoint saves after our batch-end hook
            return result

        strategy.save_checkpoint = timed
        self._unwrap = functools.partial(delattr, strategy, "save_checkpoint")
