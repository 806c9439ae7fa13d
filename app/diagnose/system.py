"""What the machine was doing while a run stalled, from the sampler's ``system.jsonl`` (tables
``system_samples`` and ``system_gpus``, docs/log-format.md): evidence for a stall's causes
(causes.CHECKS), each quoting its numbers:

- ``checkpoint``: the run folder's disk wrote as a save does, with no save logged;
- ``swap``: swap in use grew inside the gap (the host was paging);
- ``input_wait``: the GPUs idle with the input queue empty, or one CPU core pegged while the
  process was busy on it: the input pipeline did not keep up;
- ``gpu_memory``: a GPU's memory near its total (and in the samples before a crash, its
  second cause: ``before_crash``).

A spike or drop right after a stall whose gap wrote like a save is put down to that save too.
Lines and samples are matched on their Unix ``time`` (cliffwatch writes it in both); a sample
covers the ``sample_s`` seconds up to its time, and counts in a gap for the share of them
inside it (samples taken after the gap's last line are left out, as live diagnosis has not
read them when it judges the stall). The end-to-end test's stall (300 MiB written with fsync,
no checkpoint event) reads::

    checkpoint-like disk writes inside the 4.1 s gap before step 41: 80.31 MB/s against the
    run's typical 185 kB/s, with no checkpoint logged. (inferred: system.jsonl: 331.2 MB
    written to vda during the 4.1 s gap)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..db import queries
from ..units import binary
from .evidence import lines_before, seconds, sourced

SOURCE = "system.jsonl"
ALL_DISKS = {"all": "every disk"}  # the sampler's disk when it cannot tell the run folder's
QUEUE = ("*queue*depth*", "*queue*len*", "*queue*size*")  # an input queue's depth metric
# (our trainer's hs_queue_depth: prefetched batches ready when the line was written)
TYPICAL_S = 300.0  # the samples this long before a gap are the disk's typical pace: local,
# so that live diagnosis (samples so far) and the whole run judge a gap alike
SLACK_S = 60.0  # samples read past the last line: a sample covers the seconds before it
DISK_MIN_BYTES = 32e6  # written inside a gap before it looks like a save: a small model's
# checkpoint (10M parameters with Adam's two moments in fp32 is 120 MB), above the few MB of
# logs and page-cache writeback a quiet disk carries in a gap of seconds
DISK_TIMES_TYPICAL = 5.0  # ... and its rate this many times the disk's typical one, so that
# a disk busy all along (a dataset cache, another job) makes no stall a save
SWAP_GROWTH_BYTES = 32e6  # swap in use grown inside a gap before the host counts as paging:
# the kernel moves a few MB of idle pages out at any time
GPU_IDLE_PERCENT = 10.0  # mean utilisation of the GPUs at or below this: they were waiting
QUEUE_EMPTY = 0  # an input queue depth at or below this when the line was written: empty
CORE_PEGGED_PERCENT = 90.0  # the busiest core's median over the gap at or above: pegged ...
PROC_BUSY_PERCENT = 80.0  # ... while the process used at least this much CPU ...
ONE_CORE_PERCENT = 150.0  # ... and at most about one core's worth: a single thread (the
# DataLoader's main-process loading, a tokenizer) is the bottleneck, not the whole machine
GPU_MEMORY_FULL = 0.95  # memory used / total at or above: near its total, where PyTorch's
# caching allocator frees its cache and retries each allocation (slow steps), then runs out


@dataclass
class Machine:
    """The samples around some lines of one run: ``lines`` (indexed by line_id: time and any
    input-queue depth columns), ``samples`` (diagnose/system_samples_between) and ``gpus``
    (diagnose/system_gpus_between), oldest first."""
    lines: pd.DataFrame
    samples: pd.DataFrame
    gpus: pd.DataFrame

    def gap(self, before: int, after: int) -> Gap | None:
        """The seconds between the lines ``before`` and ``after`` (line ids)."""
        if before not in self.lines.index or after not in self.lines.index:
            return None
        start, end = self.lines.at[before, "time"], self.lines.at[after, "time"]
        if not (np.isfinite(start) and np.isfinite(end)) or end <= start:
            return None
        times = self.samples["time"].to_numpy(float)
        covered = _covered(times, self.samples["sample_s"].to_numpy(float))
        inside = np.minimum(times, end) - np.maximum(times - covered, start)
        share = np.clip(np.nan_to_num(inside / covered), 0.0, 1.0)
        # a sample after the line is left out: live diagnosis judges the stall when the
        # line arrives, and the whole run must judge it alike
        within = (share > 0) & (times <= end)
        earlier = (times <= start) & (times >= start - TYPICAL_S)
        gpus = self.gpus[self.gpus["time"].isin(times[within])]
        return Gap(float(start), float(end), self.samples[within].assign(share=share[within]),
                   self.samples[earlier], gpus)


@dataclass
class Gap:
    """A stall's gap: its Unix times, the samples that overlap it (``share``: the part of
    each inside), the samples of the TYPICAL_S before it, and the GPU rows of the first."""
    start: float
    end: float
    samples: pd.DataFrame
    before: pd.DataFrame
    gpus: pd.DataFrame

    @property
    def seconds(self) -> float:
        return self.end - self.start


def read(cursor, run: str, lo: int = -1, hi: int = 2 ** 62) -> Machine | None:
    """The machine around the lines of ``run`` with ids from lo to hi (default: all), or None
    for a run without system samples there (one small query for a run with none)."""
    if not queries.execute(cursor, "diagnose/system_sampled", {"run": run}).fetchall()[0][0]:
        return None
    ids = {"run": run, "lo": lo, "hi": hi}
    lines = queries.arrow(cursor, "diagnose/system_lines", ids).to_pandas()
    known = lines["time"].dropna()
    if not len(known):
        return None
    span = {"run": run, "lo": float(known.min()) - TYPICAL_S, "hi": float(known.max()) + SLACK_S}
    samples = queries.arrow(cursor, "diagnose/system_samples_between", span).to_pandas()
    if not len(samples):
        return None
    gpus = queries.arrow(cursor, "diagnose/system_gpus_between", span).to_pandas()
    if (gpus["util_percent"] <= GPU_IDLE_PERCENT).any():  # only then does the queue matter
        queue = queries.arrow(cursor, "diagnose/system_queue",
                              {**ids, "queue": list(QUEUE)}).to_pandas()
        lines = lines.merge(queue, on="line_id")
    return Machine(lines.set_index("line_id"), samples, gpus)


def _covered(times: np.ndarray, sample_s: np.ndarray) -> np.ndarray:
    """Each sample's seconds: its sample_s, else the time since the sample before."""
    since = np.diff(times, prepend=np.nan)
    return np.where(np.isfinite(sample_s) & (sample_s > 0), sample_s, since)


def _stall_gap(incident, ctx, window) -> Gap | None:
    """A stall's own gap: from the window's line before it to its line."""
    if ctx.machine is None or incident.kind != "stall" or len(window) < 2:
        return None
    ids = window["line_id"].to_numpy()
    return ctx.machine.gap(int(ids[-2]), int(ids[-1]))


def disk(incident, ctx, window, others) -> str | None:
    """Checkpoint-like writes inside a stall's gap, or inside the gap of a stall in the lines
    before another incident (the save that blocked the loop also threw the loss off)."""
    if ctx.machine is None:
        return None
    if incident.kind == "stall":
        gap, where = _stall_gap(incident, ctx, window), ""
    else:
        ids = set(window["line_id"].tolist())
        stalls = [s for s in others if s.kind == "stall" and s.line_id in ids
                  and s.line_id <= incident.line_id]
        if not stalls:
            return None
        stall = stalls[-1]
        at = ctx.index(stall.line_id)
        gap = ctx.machine.gap(int(ctx.lines["line_id"].iat[at - 1]), stall.line_id) if at else None
        incident, where = stall, f", {lines_before(window, stall.step, incident)}"
    return _written(gap, incident, where) if gap is not None else None


def _written(gap: Gap, stall, where: str) -> str | None:
    samples = gap.samples
    per_sample = samples["disk_write_bytes"].astype(float).fillna(
        samples["disk_write_bps"].astype(float) * samples["sample_s"].astype(float))
    written = float(np.nansum(per_sample.to_numpy() * samples["share"].to_numpy()))
    rate = written / gap.seconds
    typical = gap.before["disk_write_bps"].astype(float).median() if len(gap.before) else 0.0
    typical = 0.0 if not np.isfinite(typical) else float(typical)
    if written < DISK_MIN_BYTES or rate < DISK_TIMES_TYPICAL * typical:
        return None
    disks = sorted({ALL_DISKS.get(str(d), str(d)) for d in samples["disk"].dropna()}) or [
        "the run's disk"]
    span = f"the {seconds(gap.seconds)} gap"
    return sourced(f"checkpoint-like disk writes inside {span} before step {stall.step}"
                   f"{where}: {size(rate)}/s against the run's typical {size(typical)}/s, "
                   f"with no checkpoint logged.", True,
                   f"{SOURCE}: {size(written)} written to {', '.join(disks)} during {span}")


def swap(incident, ctx, window, others) -> str | None:
    """Swap in use grown inside a stall's gap: from the last sample before it (else the first
    inside it) to the most inside it."""
    gap = _stall_gap(incident, ctx, window)
    if gap is None:
        return None
    used = gap.samples["swap_used_bytes"].astype(float).dropna()
    earlier = gap.before["swap_used_bytes"].astype(float).dropna()
    if not len(used):
        return None
    first = float(earlier.iat[-1]) if len(earlier) else float(used.iat[0])
    most = float(used.max())
    if most - first < SWAP_GROWTH_BYTES:
        return None
    host = _memory(gap.samples)
    return sourced(f"swap in use grew from {binary(first)} to {binary(most)} inside the "
                   f"{seconds(gap.seconds)} gap before step {incident.step}{host}: the host "
                   f"was paging.", True, f"{SOURCE}: swap_used_bytes")


def _memory(samples: pd.DataFrame) -> str:
    """", with 119.1 GiB of the host's 119.2 GiB memory used" at the fullest sample."""
    used = samples["mem_used_bytes"].astype(float)
    total = samples["mem_total_bytes"].astype(float)
    if not used.notna().any() or not total.notna().any():
        return ""
    at = used.idxmax()
    return (f", with {binary(used[at])} of the host's {binary(total[at])} memory used"
            if np.isfinite(total[at]) else "")


def input_bound(incident, ctx, window, others) -> str | None:
    """The GPUs idle with the input queue empty, or one core pegged by a busy process (GPUs
    idle too, where sampled), inside a stall's gap."""
    gap = _stall_gap(incident, ctx, window)
    if gap is None:
        return None
    util = gap.gpus["util_percent"].astype(float).dropna()
    idle = bool(len(util)) and float(util.mean()) <= GPU_IDLE_PERCENT
    span = f"the {seconds(gap.seconds)} gap before step {incident.step}"
    queue = _queue(ctx.machine, window)
    if idle and queue is not None:
        name, depth = queue
        return sourced(f"the GPUs idled at {float(util.mean()):.3g}% inside {span} with the "
                       f"input queue empty ({name} {depth:g} at step {incident.step}): the "
                       f"input pipeline did not keep up.", True,
                       f"{SOURCE}: util_percent; the {name} column")
    core = gap.samples["cpu_max_core_percent"].astype(float).median()
    process = gap.samples["proc_cpu_percent"].astype(float).median()
    cores = gap.samples["cpu_count"].astype(float).max()
    if not (core >= CORE_PEGGED_PERCENT and PROC_BUSY_PERCENT <= process <= ONE_CORE_PERCENT
            and cores >= 2 and (idle or not len(util))):
        return None
    gpus = f" and the GPUs idled at {float(util.mean()):.3g}%" if len(util) else ""
    return sourced(f"one CPU core ran at {core:.3g}% inside {span} while the process used "
                   f"{process:.3g}% (about one of its {cores:g} cores){gpus}: a "
                   f"single-threaded input pipeline did not keep up.", True,
                   f"{SOURCE}: cpu_max_core_percent, proc_cpu_percent")


def _queue(machine: Machine, window: pd.DataFrame) -> tuple[str, float] | None:
    """(column, depth) of an input-queue depth at the stall's line when at or below
    QUEUE_EMPTY, else None."""
    line = int(window["line_id"].iat[-1])
    for name in [c for c in machine.lines.columns if c != "time"]:
        depth = pd.to_numeric(pd.Series([machine.lines.at[line, name]]), errors="coerce")[0]
        if np.isfinite(depth):
            return (name, float(depth)) if depth <= QUEUE_EMPTY else None
    return None


def gpu_memory(incident, ctx, window, others) -> str | None:
    """A GPU's memory at GPU_MEMORY_FULL of its total or more inside a stall's gap."""
    gap = _stall_gap(incident, ctx, window)
    full = _fullest(gap.gpus) if gap is not None else None
    if full is None:
        return None
    return sourced(f"{full} inside the {seconds(gap.seconds)} gap before step "
                   f"{incident.step}: {NEAR_TOTAL}", True, f"{SOURCE}: gpus' mem_used_bytes")


def before_crash(cursor, incident) -> None:
    """``gpu_memory`` added to a crash's causes when a GPU's memory was near its total in the
    samples after the last step the run logged (those of that step): the likely error is
    out of memory."""
    if incident.step < 0:
        return
    gpus = queries.arrow(cursor, "diagnose/system_gpus_at_step",
                         {"run": incident.run, "step": incident.step}).to_pandas()
    full = _fullest(gpus)
    if full is not None:
        incident.causes.append("gpu_memory")
        incident.evidence.append(sourced(
            f"{full} after step {incident.step}, the last one logged before the run failed: "
            f"{NEAR_TOTAL}", True, f"{SOURCE}: gpus' mem_used_bytes"))


NEAR_TOTAL = "near its total, allocations wait on the cache and then fail."


def _fullest(gpus: pd.DataFrame) -> str | None:
    """"GPU 0's memory was at 129.5 GiB of its 130.4 GiB (99.4%)" for the fullest GPU row, when
    at GPU_MEMORY_FULL of its total or more, else None."""
    if not len(gpus):
        return None
    used = gpus["mem_used_bytes"].astype(float)
    total = gpus["mem_total_bytes"].astype(float)
    full = (used / total).where(total > 0)
    if not full.notna().any() or float(full.max()) < GPU_MEMORY_FULL:
        return None
    at = full.idxmax()
    return (f"GPU {gpus.at[at, 'gpu']}'s memory was at {binary(used[at])} of its "
            f"{binary(total[at])} ({100 * full[at]:.3g}%)")


def size(value: float) -> str:
    """314.6 MB, 2.147 GB, 12.3 kB: bytes written, in SI units (as disks are sold and
    iostat counts), four significant figures. Memory reads in binary units (units.binary):
    a GPU's total read 150.8 GB beside PyTorch's "139.80 GiB" in one incident (H200,
    2026-12-04)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.4g} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
