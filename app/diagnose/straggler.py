"""Stragglers: one rank of a multi-process run whose steps stay slower than the other ranks'.

Each rank's lines (``rank{N}.jsonl``, table ``ranks_all``) give its seconds per step: the
seconds since its previous line divided by the steps between. Every line of a rank is judged
against the other ranks over the very same steps (their clocks read at the line's two steps,
linearly between their own lines), so a rank that logs every step and one that logs every
tenth compare alike. Fed in batches of any size (live) or all at once (``python -m app
diagnose``), a run gives the same incidents, which look like::

    Incident(run="ddp", kind="straggler", metric="rank2", step=3000, end_step=4999,
             value=0.90, baseline=0.50, causes=["slow_rank"],
             evidence=["rank 2 took 0.90 s per step against 0.50 s on the other 3 ranks
                        (1.8x, 0.40 s more per step) since step 3000."])

``value`` is the rank's median seconds per step from the episode's first line to the line
that confirmed it, ``baseline`` the other ranks' over the same lines.

A caveat: in a job whose every step ends in a collective (DDP's all-reduce) all ranks finish
each step together, so wall-clock seconds per step are alike on every rank and a slow rank
shows only in what each rank logs of its own (its input wait, ``data_wait_s``). The rule
finds ranks that fall behind in wall time: loosely coupled ranks, or one that stops keeping
up between synchronisations.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import bottleneck as bn
import numpy as np
import pandas as pd
import pyarrow as pa

from ..db import queries
from .causes import seconds
from .detect import Incident

KIND = "straggler"
# One line of one rank can take twice the others' for no lasting reason, so the rule looks at
# a rank's last WINDOW judged lines together. Under it, a checkpoint, a pause or a burst
# shorter than WINDOW / 2 lines moves none of the figures below past its threshold.
WINDOW = 100
# The share of those lines on which the rank was slower than the other ranks' median over the
# same steps. For ranks alike it is 1/2 whatever the distribution of step times (a rank's
# step is as likely above the others' median as below; a rank logging every step against
# ranks logging every tenth is below more often, as their clocks smooth their hiccups out),
# so over 100 lines its standard deviation is 0.05 and 0.8 is six of them away. Without it,
# exponential step times (noise as large as the step) made the ratio below cross 1.3 dozens
# of times in 5,000 lines.
SHARE = 0.8
# ... and the rank's median seconds per step over the window at least RATIO times the other
# ranks' median: ranks of one job a few per cent apart is placement (NUMA, PCIe, a busier
# host), no fault; at 1.3x a job that waits for its slowest rank runs at most 77% speed.
RATIO = 1.3
# ... and at least this many seconds more per step: elapsed_s is logged to the millisecond,
# so on very short steps a ratio alone could be rounding (5x the 1 ms resolution).
MIN_EXCESS_S = 0.005
# Lines the rule must hold in a row, once the window's figures have crossed (so about
# WINDOW / 2 + HOLD slow lines in all), before it is an incident.
HOLD = 50
# An episode lasts while each figure stays above about half its threshold's margin
# (hysteresis: a straggler near the threshold is one long incident, not many short ones).
KEEP_SHARE = 0.65
KEEP_RATIO = 1.0 + (RATIO - 1.0) / 2
KEEP_EXCESS_S = MIN_EXCESS_S / 2
# The input wait explains a straggler when its extra wait (data_wait_s) per logged step is at
# least this share of its extra seconds per step.
WAIT_SHARE = 0.5
TAIL = WINDOW + HOLD  # judged lines kept per rank: an onset search looks this far back
JUDGED = ("step", "line_id", "rate", "base", "ratio", "excess", "wait", "base_wait")


@dataclass
class Rank:
    """One rank's lines of one attempt, kept while they may still be needed."""

    steps: np.ndarray
    clocks: np.ndarray
    waits: np.ndarray
    ids: np.ndarray
    next: int = 1  # the next line to judge: its interval runs from the line before it
    judged: int = 0  # lines judged so far
    tail: dict[str, np.ndarray] = field(default_factory=dict)  # the last TAIL judged lines
    streak: int = 0  # judged lines in a row over the threshold, no incident open
    open: Incident | None = None

    def add(self, lines: pd.DataFrame) -> None:
        self.steps = np.concatenate([self.steps, lines["step"].to_numpy(np.int64)])
        self.clocks = np.concatenate([self.clocks, lines["clock"].to_numpy(np.float64)])
        self.waits = np.concatenate([self.waits, lines["data_wait_s"].to_numpy(np.float64)])
        self.ids = np.concatenate([self.ids, lines["line_id"].to_numpy(np.int64)])

    def drop(self, count: int) -> None:
        if count > 0:
            # copies: a view would keep a whole run's first read alive
            self.steps, self.clocks = self.steps[count:].copy(), self.clocks[count:].copy()
            self.waits, self.ids = self.waits[count:].copy(), self.ids[count:].copy()
            self.next -= count


def empty_rank() -> Rank:
    return Rank(np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty(0, np.int64))


class Stragglers:
    """Straggler detection over one run's rank lines (a rank_lines table), fed in batches."""

    def __init__(self, run: str):
        self.run = run
        self.attempts: dict[int, dict[int, Rank]] = {}  # attempt -> rank -> its lines

    def feed(self, lines: pd.DataFrame) -> list[Incident]:
        """Judge new lines (columns of diagnose/rank_lines, in stored order); returns the
        incidents found, grown or ended by them."""
        lines = lines[np.isfinite(lines["clock"].to_numpy(np.float64))]
        changed: list[Incident] = []
        for attempt, of_attempt in lines.groupby("attempt", sort=True):
            ranks = self.attempts.setdefault(int(attempt), {})
            for rank, own in of_attempt.groupby("rank", sort=False):
                ranks.setdefault(int(rank), empty_rank()).add(own)
            changed += self._judge(ranks)
            self._trim(ranks)
        changed += self._forget_old()
        return changed

    def _forget_old(self) -> list[Incident]:
        """Only the newest two attempts are kept (a rank file can still be finishing the older
        one while another has moved on); an attempt dropped ends its open episodes."""
        ended = []
        newest = max(self.attempts, default=0)
        for attempt in [a for a in self.attempts if a < newest - 1]:
            for rank in self.attempts.pop(attempt).values():
                if rank.open is not None:
                    rank.open.open = False
                    ended.append(rank.open)
        return ended

    def _judge(self, ranks: dict[int, Rank]) -> list[Incident]:
        """Judge each rank's lines up to the step every other rank has logged past."""
        found = []
        for number, me in ranks.items():
            others = [q for r, q in ranks.items() if r != number and len(q.steps)]
            if not others:
                continue  # alone: nothing to compare with (yet)
            horizon = min(int(q.steps[-1]) for q in others)
            stop = int(np.searchsorted(me.steps, horizon, side="right"))
            if stop <= me.next:
                continue
            judged = compare(me, others, np.arange(me.next, stop))
            me.next = stop
            found += self._episodes(number, me, judged, len(others))
        return found

    def _trim(self, ranks: dict[int, Rank]) -> None:
        """Drop lines no judgement needs: before each rank's next interval, and before the
        last line at or below the earliest step another rank still has to judge from."""
        starts = [int(q.steps[q.next - 1]) for q in ranks.values() if 0 < q.next <= len(q.steps)]
        if not starts:
            return
        earliest = min(starts)
        for rank in ranks.values():
            below = int(np.searchsorted(rank.steps, earliest, side="right")) - 1
            rank.drop(min(rank.next - 1, below))

    def _episodes(self, number: int, me: Rank, judged: dict[str, np.ndarray],
                  others: int) -> list[Incident]:
        """Run the rule over newly judged lines: an episode opens after HOLD lines in a row
        over the thresholds, grows while they stay over the keep levels, then ends."""
        old = len(me.tail.get("step", ()))
        tail = {k: np.concatenate([me.tail[k], judged[k]]) if old else judged[k] for k in JUDGED}
        hot, warm = rule(tail, me.judged - old)
        me.judged += len(judged["step"])
        changed: dict[int, Incident] = {}
        after = _Lines(hot, warm)  # where the next hot, not hot and not warm lines are
        pos, n = old, len(tail["step"])
        while pos < n:
            if me.open is not None:
                cold = after.cold(pos)
                if cold > pos:
                    me.open.end_step = int(tail["step"][cold - 1])
                changed[id(me.open)] = me.open
                if cold < n:  # the episode ends at the line before
                    me.open.open, me.open, me.streak = False, None, 0
                pos = cold + 1
                continue
            pos = pos if me.streak else after.hot(pos)  # cold lines change nothing
            run_end = after.not_hot(pos)
            if pos < n and me.streak + run_end - pos >= HOLD:
                confirmed = pos + HOLD - me.streak - 1
                me.open = self._incident(number, tail, confirmed, others)
                changed[id(me.open)] = me.open
                me.streak, pos = 0, confirmed + 1
                continue
            me.streak = me.streak + run_end - pos if run_end == n else 0
            pos = run_end + 1
        me.tail = {k: v[-TAIL:].copy() for k, v in tail.items()}
        return list(changed.values())

    def _incident(self, number: int, tail: dict[str, np.ndarray], confirmed: int,
                  others: int) -> Incident:
        onset = onset_of(tail["ratio"], confirmed)
        span = slice(onset, confirmed + 1)
        value, base = float(np.median(tail["rate"][span])), _median(tail["base"][span])
        incident = Incident(
            self.run, KIND, f"rank{number}", int(tail["step"][onset]),
            int(tail["step"][confirmed]), value, base, line_id=int(tail["line_id"][onset]),
            from_line_id=int(tail["line_id"][onset]), open=True,
            detail={"rank": number, "others": others,
                    "wait": _median(tail["wait"][span]),
                    "base_wait": _median(tail["base_wait"][span])})
        incident.causes, incident.evidence = explain(incident)
        return incident


def compare(me: Rank, others: list[Rank], lines: np.ndarray) -> dict[str, np.ndarray]:
    """For each of ``me``'s lines (indices), its seconds per step and the other ranks' median
    over the same steps; a rank whose first line comes after the interval's start is left
    out of that line's median."""
    lo, hi = me.steps[lines - 1], me.steps[lines]
    span = (hi - lo).astype(np.float64)
    rate = (me.clocks[lines] - me.clocks[lines - 1]) / span
    rates = np.full((len(lines), len(others)), np.nan)
    waits = np.full((len(lines), len(others)), np.nan)
    for j, q in enumerate(others):
        seconds_ = np.interp(hi, q.steps, q.clocks) - np.interp(lo, q.steps, q.clocks)
        rates[:, j] = np.where(lo >= q.steps[0], seconds_ / span, np.nan)
        at = np.minimum(np.searchsorted(q.steps, hi), len(q.steps) - 1)  # q's line at/after hi
        waits[:, j] = q.waits[at]
    base = _row_median(rates)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = rate / base
    return {"step": hi, "line_id": me.ids[lines], "rate": rate, "base": base, "ratio": ratio,
            "excess": rate - base, "wait": me.waits[lines], "base_wait": _row_median(waits)}


class _Lines:
    """The next line at or after a position that is hot, not hot, or not warm (n: none), in
    O(log n) per question: a Python loop line by line over a whole run took seconds."""

    def __init__(self, hot: np.ndarray, warm: np.ndarray):
        self.n = len(hot)
        self.hots, self.colds = np.flatnonzero(hot), np.flatnonzero(~hot)
        self.unwarm = np.flatnonzero(~warm)

    def _next(self, where: np.ndarray, pos: int) -> int:
        i = int(np.searchsorted(where, pos))
        return int(where[i]) if i < len(where) else self.n

    def hot(self, pos: int) -> int:
        return self._next(self.hots, pos)

    def not_hot(self, pos: int) -> int:
        return self._next(self.colds, pos)

    def cold(self, pos: int) -> int:
        return self._next(self.unwarm, pos)


def rule(tail: dict[str, np.ndarray], first: int) -> tuple[np.ndarray, np.ndarray]:
    """Per judged line (the tail's first is the rank's line number ``first``): whether its
    last WINDOW lines are over the thresholds (hot) and over the episode's keep levels (warm):
    the share slower than the others, the ratio and the difference of the medians. False
    until WINDOW lines are judged, however the lines came in batches."""
    n = len(tail["ratio"])
    window = min(WINDOW, n)  # bottleneck wants window <= length; the mask below decides
    least = min(WINDOW // 2, window)  # lines with a baseline a window's figures need
    known = ~np.isnan(tail["base"])
    mine = bn.move_median(np.where(known, tail["rate"], np.nan), window, min_count=least)
    theirs = bn.move_median(tail["base"], window, min_count=least)
    slower = bn.move_mean(np.where(known, tail["rate"] > tail["base"], np.nan), window,
                          min_count=least)
    full = first + np.arange(n) >= WINDOW - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio, excess = mine / theirs, mine - theirs
        hot = full & (slower >= SHARE) & (ratio >= RATIO) & (excess >= MIN_EXCESS_S)
        warm = full & (slower >= KEEP_SHARE) & (ratio >= KEEP_RATIO) & (excess >= KEEP_EXCESS_S)
    return hot, warm


def onset_of(ratio: np.ndarray, confirmed: int) -> int:
    """Where the slow stretch began: within the window of its first line over the threshold,
    the line from which on slow lines outnumber the others the most (for a clean change of
    pace, exactly the first slow line). A line is slow when its ratio is past the midpoint
    between 1 and the ratio the HOLD lines held: a rank that logs every step against ranks
    that log every tenth shows a lower ratio per line than it has over ten steps, as the
    others' clocks smooth their own noise out."""
    first = confirmed - HOLD + 1
    lo = max(first - WINDOW + 1, 0)
    held = _median(ratio[first:confirmed + 1])
    with np.errstate(invalid="ignore"):
        votes = np.where(ratio[lo:confirmed + 1] >= (1.0 + held) / 2, 1, -1)
    from_here = np.cumsum(votes[::-1])[::-1]
    return lo + int(np.argmax(from_here[:first - lo + 1]))


def explain(incident: Incident) -> tuple[list[str], list[str]]:
    """Causes and their sentences: the slow rank itself, and its input wait when that
    accounts for most of the excess."""
    d, value, base = incident.detail, incident.value, incident.baseline
    others = f"{d['others']} other rank{'s' if d['others'] != 1 else ''}"
    slow = (f"rank {d['rank']} took {seconds(value)} per step against {seconds(base)} on the "
            f"{others} ({value / base:.1f}x, {seconds(value - base)} more per step) since step "
            f"{incident.step}.")
    extra_wait = d["wait"] - d["base_wait"]
    if np.isfinite(extra_wait) and extra_wait >= WAIT_SHARE * (value - base):
        wait = (f"rank {d['rank']} waited {seconds(d['wait'])} for input per logged step "
                f"against {seconds(d['base_wait'])} on the {others} (data_wait_s): its input "
                f"pipeline explains most of the {seconds(value - base)} it lost per step.")
        return ["input_wait", "slow_rank"], [wait, slow]
    return ["slow_rank"], [slow]


def _row_median(values: np.ndarray) -> np.ndarray:
    """Each row's median, NaN skipped (a row of NaN: NaN); numpy's nanmedian took half a
    second over a run's 800,000 lines."""
    if not values.shape[1]:
        return np.full(len(values), np.nan)
    return bn.nanmedian(values, axis=1)


def _median(values: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmedian(values)) if len(values) else float("nan")


def frame_of(table: pa.Table) -> pd.DataFrame:
    """A rank_lines table as the frame Stragglers.feed takes."""
    return pd.DataFrame({name: table[name].to_numpy(zero_copy_only=False)
                         for name in table.column_names})


def by_run(table: pa.Table) -> list[tuple[str, pd.DataFrame]]:
    """Every run's lines of a rank_lines table, each run's in stored order."""
    lines = frame_of(table)
    return [(str(run), group) for run, group in lines.groupby("run", sort=True)]


def diagnose_run(cursor, run: str) -> list[Incident]:
    """Whole-run straggler diagnosis of ``run``."""
    table = queries.arrow(cursor, "diagnose/rank_lines", {"run": run, "after": -1})
    if not table.num_rows:
        return []
    found = {id(i): i for i in Stragglers(run).feed(frame_of(table))}
    return list(found.values())
