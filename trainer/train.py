"""The training loop: prefetched target states in, drafter updates out, log format v1 written.

One optimizer step = `grad_accum` micro-batches per rank. After each step the loop may write a
metrics line (every `log_every_s` seconds, or every `log_every_steps` steps), then may save a
checkpoint (`ckpt_every`). `train(config)` returns a summary that bench/trainer.py reads.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from contextlib import nullcontext
from functools import partial
from itertools import islice
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

import cliffwatch

from . import distributed
from .attention import resolve_backend
from .buckets import Batch, Sampler, bucket_table, epoch_plan
from .checkpoint import Saver, find_checkpoint, load_checkpoint
from .config import Config
from .corpus import make_corpus
from .drafter import Drafter
from .errors import TrainerError
from .faults import parse_faults
from .loss import draft_loss
from .prefetch import Prefetcher, Prepared, prepare
from .target import load_target


def lr_factor(config: Config, step: int) -> float:
    """Linear warm-up, then cosine down to `min_lr_ratio` at `steps`."""
    if step < config.optimizer.warmup_steps:
        return (step + 1) / config.optimizer.warmup_steps
    span = max(1, config.run.steps - config.optimizer.warmup_steps)
    progress = min(1.0, (step - config.optimizer.warmup_steps) / span)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return config.optimizer.min_lr_ratio + (1 - config.optimizer.min_lr_ratio) * cosine


def noise_std(config: Config, step: int) -> float:
    start, end = config.loss.noise_start, config.loss.noise_end
    return start + (end - start) * step / config.run.steps


def seed_of(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


class Cursor:
    """The global position in the micro-batch stream, shared by all ranks (what resume saves)."""

    def __init__(self, sampler: Sampler, epoch: int, index: int, world: int) -> None:
        self.stream, self.world = sampler.stream(epoch, index), world
        self.head = next(self.stream)

    def advance(self) -> list[Batch]:
        """The micro-batches of one round: one per rank, rank r's at [r]."""
        taken = []
        for _ in range(self.world):
            taken.append(self.head)
            self.head = next(self.stream)
        return taken


class Window:
    """What happened since the previous metrics line."""

    def __init__(self, produced: int) -> None:
        self.started = time.monotonic()
        self.produced = produced  # prefetcher's count of target batches at the window start
        self.sums = {"loss": 0.0, "accuracy": 0.0, "avg_streak": 0.0}
        self.micro = self.tokens = 0
        self.buckets: list[int] = []

    def add(self, loss: float, stats: dict, prepared: Prepared) -> None:
        self.sums["loss"] += loss
        self.sums["accuracy"] += stats["accuracy"]
        self.sums["avg_streak"] += stats["avg_streak"]
        self.micro += 1
        self.tokens += prepared.tokens
        self.buckets.append(prepared.batch.bucket)


def pick_device(config: Config) -> torch.device:
    if config.run.device == "cuda" and not torch.cuda.is_available():
        raise TrainerError("--device=cuda but no CUDA GPU is visible; use --device=cpu")
    if config.run.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.run.device)


def set_threads(config: Config) -> None:
    cores = len(os.sched_getaffinity(0))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    # the loop and each prefetch worker get their own core when there are enough
    share = max(1, cores // (world * (1 + config.batch.prefetch_workers)))
    torch.set_num_threads(config.run.threads or share)


class Loop:
    def __init__(self, config: Config, info: distributed.Dist, started: float) -> None:
        self.config, self.info, self.out = config, info, Path(config.run.out)
        self.device = pick_device(config)
        self.backend = resolve_backend(config.run.attn, self.device)
        self.faults = parse_faults(config.logging.fault)
        resume = config.checkpoint.resume
        self.resume_from = find_checkpoint(resume, self.out) if resume else None
        self.started = started
        self.corpus = make_corpus(config)
        self.lengths = np.array([len(seq) for seq in self.corpus])
        self.target = self._load_target()
        self._build_drafter()
        self.step, position = 0, (0, 0)
        self.resume_line: dict | None = None
        if self.resume_from is not None:
            position = self._restore(load_checkpoint(self.resume_from))
        self.run_log = self._open_run()
        self._start_data(position)
        ckpt = config.checkpoint
        self.saver = Saver(self.out, ckpt.ckpt_mode, ckpt.storage_mbps, ckpt.keep,
                           self._checkpoint_event)  # fmt: skip
        self.window = Window(0)
        self.log_time = self.blocked = 0.0
        self.total_tokens = 0
        self.last_lr = self.last_grad_norm = 0.0
        self.last_line: dict | None = None
        self.step_window = Window(0)
        self.last_step_time = self.last_wait = 0.0

    def _open_run(self) -> cliffwatch.Run:
        """The run folder (run.json, run_start; a resume event at the checkpoint's step)."""
        resumed = self.resume_from is not None
        return cliffwatch.init(
            logdir=self.out.parent, name=self.out.name, config=self.config.to_dict(),
            resume=self.step if resumed else False, checkpoint=self.resume_from,
            system=self.config.logging.system_metrics, rank=self.info.rank,
            world_size=self.info.world, started=self.started,
        )

    def _load_target(self):
        if self.info.main:  # rank 0 pre-trains (once, then cached); the others then load it
            target, self.target_facts = load_target(self.config)
        distributed.barrier(self.info)
        if not self.info.main:
            target, self.target_facts = load_target(self.config, build=False)
        target.backend = self.backend
        return target.to(self.device)

    def _build_drafter(self) -> None:
        config = self.config
        torch.manual_seed(config.run.seed)
        self.drafter = Drafter(config).to(self.device)
        self.model = DistributedDataParallel(self.drafter) if self.info.world > 1 else self.drafter
        self.optimizer = torch.optim.AdamW(
            self.drafter.parameters(), lr=config.optimizer.lr,
            weight_decay=config.optimizer.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, partial(lr_factor, config)
        )

    def _start_data(self, position: tuple[int, int]) -> None:
        config, info = self.config, self.info
        sampler = Sampler(self.lengths, config)
        self.cursor = Cursor(sampler, *position, info.world)
        mine = islice(sampler.stream(*position), info.rank, None, info.world)
        work = partial(prepare, corpus=self.corpus, target=self.target, config=config,
                       device=self.device)  # fmt: skip
        batching = config.batch
        self.prefetch = Prefetcher(mine, work, batching.prefetch_workers, batching.queue_size)

    # --- checkpoint state -------------------------------------------------------------------

    def state(self) -> dict:
        """Everything resume needs; tensors are live references (Saver copies for async)."""
        return {
            "step": self.step,
            "drafter": self.drafter.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "sampler": {"epoch": self.cursor.head.epoch, "index": self.cursor.head.index},
            "rng": {
                "python": random.getstate(),
                "numpy": np.random.get_state(),
                "torch": torch.get_rng_state(),
            },
            "config": self.config.to_dict(),
            "last_line": self.last_line,
        }

    def _restore(self, state: dict) -> tuple[int, int]:
        try:
            self.drafter.load_state_dict(state["drafter"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise TrainerError(
                f"--resume: {self.resume_from} does not fit this config ({exc}); resume with "
                "the settings the checkpoint was saved with"
            ) from None
        self.scheduler.load_state_dict(state["scheduler"])
        random.setstate(state["rng"]["python"])
        np.random.set_state(state["rng"]["numpy"])
        torch.set_rng_state(state["rng"]["torch"])
        self.step = state["step"]
        self.resume_line = state.get("last_line")
        return state["sampler"]["epoch"], state["sampler"]["index"]

    def _checkpoint_event(self, kind: str, step: int, /, **extra: object) -> None:
        self.run_log.event(kind, step, **extra)  # the Saver's checkpoint_start / _end

    # --- one optimizer step -----------------------------------------------------------------

    def _noisy_context(self, prepared: Prepared) -> torch.Tensor:
        """Target states plus uniform noise of std `noise_std` (seeded by the batch: exact)."""
        std = noise_std(self.config, self.step)
        batch = prepared.batch
        seed = seed_of(self.config.run.seed, 66, batch.epoch, batch.index)
        generator = torch.Generator().manual_seed(seed)
        noise = torch.rand(prepared.context.shape, generator=generator) * 2 - 1
        return prepared.context + (noise * std * math.sqrt(3)).to(self.device)

    def _micro_step(self, prepared: Prepared, sync: bool, poison: bool) -> None:
        config = self.config
        quiet = nullcontext() if sync or self.info.world == 1 else self.model.no_sync()
        with quiet:
            logits = self.model(
                self._noisy_context(prepared), prepared.block_tokens, prepared.anchors
            )
            loss, stats = draft_loss(logits, prepared.target_logits, config)
            if poison:  # injected fault nan@STEP
                loss = loss * float("nan")
            (loss / config.batch.grad_accum).backward()
        for window in (self.window, self.step_window):
            window.add(loss.item(), stats, prepared)
        self.total_tokens += prepared.tokens

    def _apply_faults(self, step: int) -> bool:
        """Stall or spike as injected for `step`; True when its loss must turn NaN."""
        poison = False
        for fault in self.faults.get(step, []):
            self.run_log.event("fault", step, kind=fault.kind, value=fault.value)
            if fault.kind == "stall":
                time.sleep(fault.value)
            elif fault.kind == "lr-spike":
                for group in self.optimizer.param_groups:
                    group["lr"] *= fault.value  # the scheduler resets it after this step
            else:
                poison = True
        return poison

    def train_step(self) -> None:
        step = self.step + 1
        poison = self._apply_faults(step)
        started, waited = time.monotonic(), 0.0
        self.step_window = Window(0)
        for micro in range(self.config.batch.grad_accum):
            prepared, wait = self.prefetch.get()
            waited += wait
            taken = self.cursor.advance()
            assert prepared.batch == taken[self.info.rank], "prefetch out of step with cursor"
            for batch in taken:
                if batch.index == 0:
                    self.run_log.epoch(batch.epoch, step)
            last = micro == self.config.batch.grad_accum - 1
            self._micro_step(prepared, sync=last, poison=poison and micro == 0)
        self._update()
        self.step = step
        self.last_step_time, self.last_wait = time.monotonic() - started, waited

    def _update(self) -> None:
        """Clip, then step, unless the gradient is not finite (then skip, as a loss scaler)."""
        clip = self.config.optimizer.grad_clip or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.drafter.parameters(), clip)
        self.last_grad_norm = float(norm)
        self.last_lr = self.optimizer.param_groups[0]["lr"]
        if math.isfinite(self.last_grad_norm):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()

    # --- logging ----------------------------------------------------------------------------

    def _log_due(self, last_step: int) -> bool:
        config = self.config
        if config.logging.log_every_steps:
            return self.step % config.logging.log_every_steps == 0 or self.step == last_step
        due = time.monotonic() - self.window.started >= config.logging.log_every_s
        due = due or self.step == last_step
        if self.info.world > 1:  # rank 0's clock decides, so all ranks log the same steps
            due = distributed.all_sum(self.info, [float(due and self.info.main)])[0] > 0
        return due

    def log(self) -> None:
        started = time.monotonic()
        window, seconds = self.window, max(started - self.window.started, 1e-9)
        produced = self.prefetch.produced - window.produced
        sums = distributed.all_sum(
            self.info, [*window.sums.values(), window.micro, window.tokens, produced]
        )
        micro = max(sums[3], 1)
        values = {key: sums[i] / micro for i, key in enumerate(window.sums)}
        values.update(
            lr=self.last_lr,
            noise_std=round(noise_std(self.config, self.step - 1), 6),
            tgt_batch_per_sec=round(sums[5] / seconds, 3),
            dft_batch_per_sec=round(sums[3] / seconds, 3),
            tok_per_sec=round(sums[4] / seconds, 1),
            hs_queue_depth=self.prefetch.depth(),
            grad_norm=self.last_grad_norm,
            epoch=newest_epoch(self.cursor),
            buckets=window.buckets,
        )
        self.run_log.log(values, self.step)
        self.run_log.rank_line(self.step, step_time_s=round(self.last_step_time, 4),
                           data_wait_s=round(self.last_wait, 4))
        self.window = Window(self.prefetch.produced)
        self.progress.set_postfix(loss=f"{values['loss']:.3f}", acc=f"{values['accuracy']:.3f}")
        self.log_time += time.monotonic() - started

    # --- the run ----------------------------------------------------------------------------

    def _announce(self) -> None:
        info, config = self.info, self.config
        plan = epoch_plan(self.lengths, config, 0)
        steps_per_epoch = max(1, len(plan) // (config.batch.grad_accum * info.world))
        self.run_log.describe(buckets=bucket_table(config), steps_per_epoch=steps_per_epoch)
        self.run_log.event("target_ready", self.step, **self.target_facts)
        # logging continues from the checkpoint's step: its line again, so a step <= the
        # previous line's step starts a new attempt for the monitor
        if self.resume_from is not None and self.resume_line is not None:
            line = {**self.resume_line, "epoch": newest_epoch(self.cursor)}
            self.run_log.log(line, self.step)

    def _maybe_save(self, last_step: int) -> None:
        every = self.config.checkpoint.ckpt_every
        if not every or (self.step % every and self.step != last_step):
            return
        self.last_line = self._step_values()  # every rank joins this all-reduce
        if self.info.main:
            self.blocked += self.saver.save(self.state(), self.step)

    def _step_values(self) -> dict:
        """Metrics of the last step alone (all ranks), replayed as the first line on resume."""
        window = self.step_window
        sums = distributed.all_sum(self.info, [*window.sums.values(), window.micro])
        values = {key: sums[i] / max(sums[-1], 1) for i, key in enumerate(window.sums)}
        noise = round(noise_std(self.config, self.step - 1), 6)
        return {**values, "lr": self.last_lr, "noise_std": noise, "grad_norm": self.last_grad_norm}

    def run(self) -> dict:
        config = self.config
        last_step = min(config.run.steps, config.run.stop_after or config.run.steps)
        show = {"on": True, "off": False}.get(config.logging.progress, sys.stderr.isatty())
        self.progress = tqdm(total=config.run.steps, initial=self.step, file=sys.stderr,
                             disable=not (show and self.info.main))  # fmt: skip
        self._announce()
        status, error, loop_started = "failed", None, time.monotonic()
        try:
            while self.step < last_step:
                self.train_step()
                self.progress.update(1)
                if self._log_due(last_step):
                    self.log()
                self._maybe_save(last_step)
            status = "completed" if self.step >= config.run.steps else "interrupted"
        except KeyboardInterrupt as exc:
            status, error = "interrupted", exc
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._finish(status, error)
        return self.summary(status, time.monotonic() - loop_started)

    def _finish(self, status: str, error: BaseException | None) -> None:
        self.prefetch.close()
        try:
            self.saver.wait()
        finally:
            self.run_log.finish(error, status=status, step=self.step)
            self.progress.close()

    def summary(self, status: str, loop_s: float) -> dict:
        return {
            "status": status,
            "step": self.step,
            "loop_s": loop_s,
            "log_s": self.log_time,
            "blocked_s": self.blocked,
            "produced": self.prefetch.produced,
            "tokens": self.total_tokens,
        }


def newest_epoch(cursor: Cursor) -> int:
    """The epoch of the newest micro-batch consumed (the cursor's head is the next one)."""
    head = cursor.head
    return head.epoch if head.index > 0 else head.epoch - 1


def train(config: Config) -> dict:
    """Run (or resume) one training attempt as `config` says; returns a summary dict."""
    started = time.monotonic()  # elapsed_s counts from here: this attempt's start
    set_threads(config)
    info = distributed.init(pick_device(config))
    try:
        summary = Loop(config, info, started).run()
        # every rank out of its last collective before any tears gloo down: a rank destroying
        # its group while the other still had work in flight aborted at exit ("terminate
        # called without an active exception", about 1 torchrun test in 9 on 2 cores)
        distributed.barrier(info)
        return summary
    finally:
        distributed.shutdown(info)
