"""The training loop: prefetched target states in, drafter updates out, log format v1 written.

Reads top to bottom, as nanoGPT's train.py does: `set_up` builds everything as locals (device,
target, drafter, resume, run log, data, saver), then `run` is the one loop. One optimizer step =
`grad_accum` micro-batches per rank. After each step the loop may write a metrics line (every
`log_every_s` seconds, or every `log_every_steps` steps), then may save a checkpoint
(`ckpt_every`). Only the step number and the `Meters` change inside the loop. `train(config)`
returns a summary that bench/trainer.py reads.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
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
from .faults import Fault, parse_faults
from .loss import draft_loss
from .meters import Meters, Window
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


def train(config: Config) -> dict:
    """Run (or resume) one training attempt as `config` says; returns a summary dict."""
    started = time.monotonic()  # elapsed_s counts from here: this attempt's start
    set_threads(config)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    if config.run.deterministic:
        deterministic()
    info = distributed.init(pick_device(config))
    try:
        summary = run(set_up(config, info, started))
        # every rank out of its last collective before any tears gloo down: a rank destroying
        # its group while the other still had work in flight aborted at exit ("terminate
        # called without an active exception", about 1 torchrun test in 9 on 2 cores)
        distributed.barrier(info)
        return summary
    finally:
        distributed.shutdown(info)
        torch.use_deterministic_algorithms(was_deterministic)  # a caller's process as it was


@dataclass(frozen=True)
class Model:
    """The drafter, what the step calls (DDP-wrapped on several ranks), optimizer, schedule."""

    drafter: Drafter
    wrapped: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler


@dataclass(frozen=True)
class Parts:
    """What `set_up` built; the loop uses these and reassigns none of them."""

    config: Config
    info: distributed.Dist
    device: torch.device
    faults: dict[int, list[Fault]]
    model: Model
    run_log: cliffwatch.Run
    cursor: Cursor
    prefetch: Prefetcher
    saver: Saver
    step: int  # the step the loop starts after: 0, or the checkpoint's


def set_up(config: Config, info: distributed.Dist, started: float) -> Parts:
    """Everything before the first step, in the order it must happen (resume after seeding)."""
    out = Path(config.run.out)
    device = pick_device(config)
    backend = resolve_backend(config.run.attn, device)
    faults = parse_faults(config.logging.fault)
    resume = config.checkpoint.resume
    resume_from = find_checkpoint(resume, out) if resume else None
    corpus = make_corpus(config)
    lengths = np.array([len(seq) for seq in corpus])
    target, target_facts = load_target_on(config, info, backend, device)
    model = build_model(config, device, info.world)
    step, position, resume_line = 0, (0, 0), None
    if resume_from is not None:
        step, position, resume_line = restore(model, load_checkpoint(resume_from), resume_from)
    run_log = open_run(config, info, step, resume_from, started)
    sampler = Sampler(lengths, config)
    cursor = Cursor(sampler, *position, info.world)
    prefetch = start_prefetch(config, info, sampler.stream(*position), corpus, target, device)
    ckpt = config.checkpoint
    saver = Saver(out, ckpt.ckpt_mode, ckpt.storage_mbps, ckpt.keep, run_log.event)
    announce(run_log, config, info, lengths, step, target_facts)
    if resume_line is not None:
        # logging continues from the checkpoint's step: its line again, so a step <= the
        # previous line's step starts a new attempt for the monitor
        run_log.log({**resume_line, "epoch": newest_epoch(cursor)}, step)
    return Parts(config, info, device, faults, model, run_log, cursor, prefetch, saver, step)


def run(parts: Parts) -> dict:
    """The loop: a step, then maybe a metrics line, then maybe a save; then the summary."""
    config, info, step = parts.config, parts.info, parts.step
    last_step = min(config.run.steps, config.run.stop_after or config.run.steps)
    meters = Meters(progress_bar(config, info, step))
    status, error, loop_started = "failed", None, time.monotonic()
    try:
        while step < last_step:
            train_step(parts, step + 1, meters)
            step += 1
            meters.progress.update(1)
            if log_due(config, info, meters.window, step, last_step):
                write_line(parts, step, meters)
            if save_due(config, step, last_step):
                save(parts, step, meters)
        status = "completed" if step >= config.run.steps else "interrupted"
    except KeyboardInterrupt as exc:
        status, error = "interrupted", exc
        raise
    except BaseException as exc:
        error = exc
        raise
    finally:
        finish(parts, meters, status, error, step)
    return {
        "status": status,
        "step": step,
        "loop_s": time.monotonic() - loop_started,
        "log_s": meters.log_s,
        "blocked_s": meters.blocked_s,
        "produced": parts.prefetch.produced,
        "tokens": meters.tokens,
    }


# --- the parts ------------------------------------------------------------------------------


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


def deterministic() -> None:
    """PyTorch's deterministic kernels. CUDA's defaults add in a varying order (atomics in
    backward, cuBLAS split-K): on an H200, two straight 20-step tiny runs ended up to 3.0e-4
    apart in a parameter and a resumed one 2.2e-4 from them; with these, both 0. cuBLAS needs
    its workspace setting before its first use."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)


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




def newest_epoch(cursor: Cursor) -> int:
    """The epoch of the newest micro-batch consumed (the cursor's head is the next one)."""
    head = cursor.head
    return head.epoch if head.index > 0 else head.epoch - 1


# --- set-up ---------------------------------------------------------------------------------


def load_target_on(
    config: Config, info: distributed.Dist, backend: str, device: torch.device
) -> tuple[torch.nn.Module, dict]:
    """The frozen target on `device`, and the facts its `target_ready` event reports."""
    if info.main:  # rank 0 pre-trains (once, then cached); the others then load it
        target, facts = load_target(config)
    distributed.barrier(info)
    if not info.main:
        target, facts = load_target(config, build=False)
    target.backend = backend
    return target.to(device), facts


def build_model(config: Config, device: torch.device, world: int) -> Model:
    torch.manual_seed(config.run.seed)  # the drafter's initial weights: same seed, same run
    drafter = Drafter(config).to(device)
    optimizer = torch.optim.AdamW(
        drafter.parameters(), lr=config.optimizer.lr,
        weight_decay=config.optimizer.weight_decay,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, partial(lr_factor, config))
    wrapped = DistributedDataParallel(drafter) if world > 1 else drafter
    return Model(drafter, wrapped, optimizer, scheduler)


def restore(model: Model, state: dict, path: Path) -> tuple[int, tuple[int, int], dict | None]:
    """Load a checkpoint's state; its (step, stream position, last metrics line)."""
    try:
        model.drafter.load_state_dict(state["drafter"])
        model.optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise TrainerError(
            f"--resume: {path} does not fit this config ({exc}); resume with "
            "the settings the checkpoint was saved with"
        ) from None
    model.scheduler.load_state_dict(state["scheduler"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])
    position = state["sampler"]["epoch"], state["sampler"]["index"]
    return state["step"], position, state.get("last_line")


def checkpoint_state(parts: Parts, step: int, last_line: dict) -> dict:
    """Everything resume needs; tensors are live references (Saver copies for async)."""
    model = parts.model
    return {
        "step": step,
        "drafter": model.drafter.state_dict(),
        "optimizer": model.optimizer.state_dict(),
        "scheduler": model.scheduler.state_dict(),
        "sampler": {"epoch": parts.cursor.head.epoch, "index": parts.cursor.head.index},
        "rng": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
        },
        "config": parts.config.to_dict(),
        "last_line": last_line,
    }


def open_run(
    config: Config, info: distributed.Dist, step: int, resume_from: Path | None, started: float
) -> cliffwatch.Run:
    """The run folder (run.json, run_start; a resume event at the checkpoint's step)."""
    out = Path(config.run.out)
    return cliffwatch.init(
        logdir=out.parent, name=out.name, config=config.to_dict(),
        resume=step if resume_from is not None else False, checkpoint=resume_from,
        system=config.logging.system_metrics, rank=info.rank,
        world_size=info.world, started=started,
    )


def start_prefetch(config: Config, info: distributed.Dist, stream, corpus, target,
                   device: torch.device) -> Prefetcher:  # fmt: skip
    """Prepares this rank's share of `stream` (every world-th micro-batch) ahead of the loop."""
    mine = islice(stream, info.rank, None, info.world)
    work = partial(prepare, corpus=corpus, target=target, config=config, device=device)
    return Prefetcher(mine, work, config.batch.prefetch_workers, config.batch.queue_size)


def announce(run_log: cliffwatch.Run, config: Config, info: distributed.Dist,
             lengths: np.ndarray, step: int, target_facts: dict) -> None:  # fmt: skip
    plan = epoch_plan(lengths, config, 0)
    steps_per_epoch = max(1, len(plan) // (config.batch.grad_accum * info.world))
    run_log.describe(buckets=bucket_table(config), steps_per_epoch=steps_per_epoch)
    run_log.event("target_ready", step, **target_facts)


def progress_bar(config: Config, info: distributed.Dist, step: int) -> tqdm:
    show = {"on": True, "off": False}.get(config.logging.progress, sys.stderr.isatty())
    return tqdm(total=config.run.steps, initial=step, file=sys.stderr,
                disable=not (show and info.main))  # fmt: skip


# --- one optimizer step ---------------------------------------------------------------------


def train_step(parts: Parts, step: int, meters: Meters) -> None:
    """Optimizer step `step`: `grad_accum` micro-batches on each rank, then the update."""
    config, accum = parts.config, parts.config.batch.grad_accum
    poison = apply_faults(parts, step)
    started, waited = time.monotonic(), 0.0
    meters.start_step()
    std = noise_std(config, step - 1)
    for micro in range(accum):
        prepared, wait = parts.prefetch.get()
        waited += wait
        taken = parts.cursor.advance()
        assert prepared.batch == taken[parts.info.rank], "prefetch out of step with cursor"
        for batch in taken:
            if batch.index == 0:
                parts.run_log.epoch(batch.epoch, step)
        last = micro == accum - 1
        loss, stats = micro_step(parts, prepared, std, sync=last, poison=poison and micro == 0)
        meters.add(loss, stats, prepared)
    lr, grad_norm = update(parts.model, config.optimizer.grad_clip)
    meters.end_step(lr, grad_norm, time.monotonic() - started, waited)


def apply_faults(parts: Parts, step: int) -> bool:
    """Stall or spike as injected for `step`; True when its loss must turn NaN."""
    poison = False
    for fault in parts.faults.get(step, []):
        parts.run_log.event("fault", step, kind=fault.kind, value=fault.value)
        if fault.kind == "stall":
            time.sleep(fault.value)
        elif fault.kind == "lr-spike":
            for group in parts.model.optimizer.param_groups:
                group["lr"] *= fault.value  # the scheduler resets it after this step
        else:
            poison = True
    return poison


def micro_step(parts: Parts, prepared: Prepared, std: float, sync: bool,
               poison: bool) -> tuple[float, dict]:  # fmt: skip
    """Forward and backward of one micro-batch; DDP syncs gradients on the step's last one."""
    config, model = parts.config, parts.model
    quiet = nullcontext() if sync or parts.info.world == 1 else model.wrapped.no_sync()
    with quiet:
        context = noisy_context(prepared, std, config.run.seed, parts.device)
        logits = model.wrapped(context, prepared.block_tokens, prepared.anchors)
        loss, stats = draft_loss(logits, prepared.target_logits, config)
        if poison:  # injected fault nan@STEP
            loss = loss * float("nan")
        (loss / config.batch.grad_accum).backward()
    return loss.item(), stats


def noisy_context(prepared: Prepared, std: float, seed: int, device: torch.device) -> torch.Tensor:
    """Target states plus uniform noise of std `std` (seeded by the batch: exact)."""
    batch = prepared.batch
    generator = torch.Generator().manual_seed(seed_of(seed, 66, batch.epoch, batch.index))
    noise = torch.rand(prepared.context.shape, generator=generator) * 2 - 1
    return prepared.context + (noise * std * math.sqrt(3)).to(device)


def update(model: Model, grad_clip: float) -> tuple[float, float]:
    """Clip, then step, unless the gradient is not finite (then skip, as a loss scaler does);
    the (learning rate, gradient norm) the step used."""
    norm = torch.nn.utils.clip_grad_norm_(model.drafter.parameters(), grad_clip or float("inf"))
    grad_norm, lr = float(norm), model.optimizer.param_groups[0]["lr"]
    if math.isfinite(grad_norm):
        model.optimizer.step()
    model.optimizer.zero_grad(set_to_none=True)
    model.scheduler.step()
    return lr, grad_norm


# --- metrics lines and saves ----------------------------------------------------------------


def log_due(config: Config, info: distributed.Dist, window: Window, step: int,
            last_step: int) -> bool:  # fmt: skip
    if config.logging.log_every_steps:
        return step % config.logging.log_every_steps == 0 or step == last_step
    due = time.monotonic() - window.started >= config.logging.log_every_s
    due = due or step == last_step
    if info.world > 1:  # rank 0's clock decides, so all ranks log the same steps
        due = distributed.all_sum(info, [float(due and info.main)])[0] > 0
    return due


def write_line(parts: Parts, step: int, meters: Meters) -> None:
    """The metrics line of the window (all ranks), this rank's line, then a new window."""
    started = time.monotonic()
    averages, rates = meters.line(parts.info, parts.prefetch.produced)
    values = {
        **averages,
        "lr": meters.lr,
        "noise_std": round(noise_std(parts.config, step - 1), 6),
        **rates,
        "hs_queue_depth": parts.prefetch.depth(),
        "grad_norm": meters.grad_norm,
        "epoch": newest_epoch(parts.cursor),
        "buckets": meters.window.buckets,
    }
    parts.run_log.log(values, step)
    parts.run_log.rank_line(step, step_time_s=round(meters.step_s, 4),
                            data_wait_s=round(meters.wait_s, 4))  # fmt: skip
    meters.new_window(parts.prefetch.produced)
    meters.progress.set_postfix(loss=f"{values['loss']:.3f}", acc=f"{values['accuracy']:.3f}")
    meters.log_s += time.monotonic() - started


def save_due(config: Config, step: int, last_step: int) -> bool:
    every = config.checkpoint.ckpt_every
    return bool(every) and (step % every == 0 or step == last_step)


def save(parts: Parts, step: int, meters: Meters) -> None:
    """A checkpoint of `step` (rank 0 writes); its last line is replayed first on resume."""
    noise = round(noise_std(parts.config, step - 1), 6)
    averages = meters.step_line(parts.info)  # every rank joins this all-reduce
    last_line = {**averages, "lr": meters.lr, "noise_std": noise, "grad_norm": meters.grad_norm}
    if parts.info.main:
        meters.blocked_s += parts.saver.save(checkpoint_state(parts, step, last_line), step)


def finish(parts: Parts, meters: Meters, status: str, error: BaseException | None,
           step: int) -> None:  # fmt: skip
    parts.prefetch.close()
    try:
        parts.saver.wait()
    finally:
        parts.run_log.finish(error, status=status, step=step)
        meters.progress.close()
