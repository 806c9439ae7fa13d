"""A Hugging Face ``transformers.TrainerCallback`` that writes log format v1::

    from cliffwatch.integrations.transformers import CliffwatchCallback
    trainer = Trainer(..., callbacks=[CliffwatchCallback(logdir="runs")])

A run at ``save_steps=15, eval_steps=10`` writes, around its first save (``events.jsonl``)::

    {"event": "eval_start", "step": 10, ...}
    {"event": "eval_end", "step": 10, "duration_s": 0.04, ...}
    {"event": "checkpoint_start", "step": 15, "path": "out/checkpoint-15", ...}
    {"event": "checkpoint_end", "step": 15, "blocked_s": 3.02, "bytes": 81234, ...}

and each ``on_log`` as a ``metrics.jsonl`` line (``{"step": 15, "loss": 3.2, "grad_norm":
1.1, "learning_rate": 4e-05, "epoch": 0.47, ...}``; an evaluation's ``eval_*`` metrics as a
line of their own at its step; the end-of-training ``train_runtime`` entry into the run's
summary).

The Trainer has no hook around a save, so its seconds are measured from the last hook before
``_save_checkpoint`` to ``on_save``: the Trainer at step N runs ``on_step_end``, then logs
(``on_log``), evaluates (``on_evaluate``), and saves, in that order, and the save's start is
written at the last of those hooks that step has. On an exception the Trainer calls no hook:
``cliffwatch.init``'s exception hook writes ``run_end`` with the error.
"""

from __future__ import annotations

import time
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

import cliffwatch

from . import is_eval_name, numbers, whole_epoch

SUMMARY_KEY = "train_runtime"  # the Trainer's end-of-training log entry has it


class CliffwatchCallback(TrainerCallback):
    """``logdir``, ``name``, ``config`` and ``init_kwargs`` go to ``cliffwatch.init`` (name:
    ``TrainingArguments.run_name``, else the output folder's name, so that a resumed Trainer
    writes on in the same run). ``run``: an open ``cliffwatch`` run to write to instead."""

    def __init__(self, logdir: str | Path = "runs", name: str | None = None,
                 config: dict | None = None, *, run=None, **init_kwargs):
        self.logdir, self.name, self.config = logdir, name, config
        self.init_kwargs, self.run = init_kwargs, run
        self._ours = run is None  # a run this callback opened is finished at train end
        self._output_dir = "."  # TrainingArguments.output_dir, known at train begin
        self._save_started: float | None = None  # monotonic time the open save began
        self._mark = time.monotonic()  # the last hook's time: a save no flag announced began
        self._stepped = (0, 0.0)  # the last step ended, and its monotonic time
        self._waited = 0.0  # seconds from the last hook to this step's begin: its batches
        self._eval_started: float | None = None  # ... and the open evaluation pass

    # -- the run --------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self._output_dir = args.output_dir
        # a Trainer that loaded a checkpoint starts at its step; on_train_begin is not told
        # the folder, which is the one the Trainer names after that step when it is there
        step = state.global_step
        folder = self._folder(state) if step > 0 else None
        checkpoint = str(folder) if folder is not None and folder.exists() else None
        if self.run is None:
            config = {**args.to_dict(), **(self.config or {})}
            self.run = cliffwatch.init(
                logdir=self.logdir, name=self.name or args.run_name or Path(args.output_dir).name,
                config=config, resume=step if step > 0 else False, checkpoint=checkpoint,
                rank=args.process_index, world_size=args.world_size, **self.init_kwargs)
        elif step > 0:
            self.run.resume(step, checkpoint)
        self._stepped = (step, time.monotonic())

    def on_train_end(self, args, state, control, **kwargs):
        if self._ours:  # the next train() of this Trainer opens the run again, resumed
            self.run.finish()
            self.run = None

    # -- what the loop does ---------------------------------------------------------------

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._mark = time.monotonic()  # the epoch's loader starts after this hook
        epoch = whole_epoch(state.epoch or 0.0)
        if epoch is not None:  # the epoch's first batch is the next step's
            self.run.epoch(epoch, step=state.global_step + 1)

    def on_step_begin(self, args, state, control, **kwargs):
        # the Trainer fetches a step's batches after the last hook of the step before
        self._waited = time.monotonic() - self._mark

    def on_step_end(self, args, state, control, **kwargs):
        self._next(state, control)
        # this rank's seconds per step and waiting for input (rank{N}.jsonl, written with
        # several processes only), for the monitor's straggler check
        step, (before, then) = state.global_step, self._stepped
        if step > before:
            self.run.rank_line(step, step_time_s=round((self._mark - then) / (step - before), 4),
                               data_wait_s=round(self._waited, 4))
            self._stepped = (step, self._mark)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._next(state, control)  # save_strategy="epoch" saves after this hook

    def _next(self, state, control) -> None:
        """Open what the Trainer does next, when no hook comes before it: it logs, then
        evaluates, then saves (DefaultFlowCallback, first in the list, has set the flags)."""
        self._mark = time.monotonic()
        if control.should_evaluate and not control.should_log:
            self._open_eval(state)
        if control.should_save and not (control.should_log or control.should_evaluate):
            self._open_save(state)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._mark = time.monotonic()
        logs = numbers(logs or {})
        if self.run is None:
            return  # a log() outside train(): no run is open
        if SUMMARY_KEY in logs:
            self.run.summary.update(logs)
        elif logs and all(is_eval_name(k) for k in logs if k != "epoch"):
            return  # an evaluation's metrics: on_evaluate writes them with its end
        elif logs:
            epoch = logs.pop("epoch", None)
            self.run.log(logs, step=state.global_step, epoch=epoch)
            # the handler cleared should_log before calling us: what comes next is the rest
            if control.should_evaluate:
                self._open_eval(state)
            elif control.should_save:
                self._open_save(state)

    def on_prediction_step(self, args, state, control, **kwargs):
        # an evaluate() no step flag announced (eval_on_start, a call after a step)
        if self._eval_started is None and self.run is not None:
            self._open_eval(state)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._close_eval(state, metrics)
        self._mark = time.monotonic()
        if control.should_save:
            self._open_save(state)

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        self._close_eval(state, metrics)  # a test pass: its metrics are test_*

    def on_save(self, args, state, control, **kwargs):
        if self._save_started is None:  # a save no flag announced (save_strategy="best"):
            self._open_save(state)  # its start is written late, its seconds counted
            self._save_started = self._mark  # from the hook before it
        self._close_save(state)
        self._mark = time.monotonic()

    # -- saves and evaluations ----------------------------------------------------------

    def _open_eval(self, state) -> None:
        self._eval_started = time.monotonic()
        self.run.event("eval_start", state.global_step)

    def _close_eval(self, state, metrics: dict | None) -> None:
        if self.run is None:
            return  # an evaluate() after train() ended: the run is finished
        if self._eval_started is None:
            self._open_eval(state)
        values = numbers(metrics or {})
        values.pop("epoch", None)
        seconds = time.monotonic() - self._eval_started
        self._eval_started = None
        self.run.event("eval_end", state.global_step, duration_s=round(seconds, 4))
        if values:  # eval_* names: the monitor's readers keep them apart from training
            self.run.log(values, step=state.global_step, epoch=state.epoch)

    def _open_save(self, state) -> None:
        self._save_started = time.monotonic()
        self.run.checkpoint_start(state.global_step, path=str(self._folder(state)))

    def _close_save(self, state) -> None:
        blocked = round(time.monotonic() - self._save_started, 4)
        self._save_started = None
        # the Trainer saves in the loop's thread: the loop waited the whole save
        self.run.checkpoint_end(state.global_step, path=str(self._folder(state)),
                                blocked_s=blocked, duration_s=blocked)

    def _folder(self, state) -> Path:
        return Path(self._output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
