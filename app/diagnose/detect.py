"""Incident detection over one run's timeline, fed in batches of any size.

Every decision about line ``i`` uses only the ``BASELINE`` lines before it (a spike also the
sudden rises of the ``SPIKE_HISTORY`` lines before it, and for a divergence the best and highest
values of all lines before it) and, for a cliff, the ``CLIFF_STAYS`` lines after it (a divergence
the ``DIVERGE_STAYS`` ones), so feeding a run line by line (live) or all at once (``python -m app
diagnose``) finds the same incidents. An incident looks like::

    Incident(run="seed-cliff", kind="spike", metric="loss", step=2029, end_step=2035,
             value=13.0, baseline=0.75, line_id=1002, from_line_id=997, worst_step=2029)

``step`` is the episode's first line; ``value`` is its worst value (the top of a spike, the
bottom of a cliff) and ``worst_step`` where it was logged.

Thresholds are robust to normal noise: the baseline is the median of the previous 20 lines and
the noise scale their interquartile range, so a 12% wobble or a single 40% slower interval is
not an incident, and a spike must be sudden (a warm-up ramp rises a little every line).

A spike must also stand out from the run's own history. Some metrics are heavy-tailed: a
gradient norm that sits at 0.28 jumps to 0.6-1.0 every thousand steps or so, dozens of noise
scales above its baseline, and a person who sees the whole chart calls that texture, not an
incident. So a spike rises at least ``SPIKE_MARGIN`` times as far above its baseline as the
run's second-largest sudden rise of the previous ``SPIKE_HISTORY`` lines (the second, so that
one earlier spike does not hide the next). On light-tailed noise that bar sits near the 8 noise
scales asked anyway (the second-largest of a few thousand Gaussian rises is about 3 of them),
so it only bites where the run has shown large rises before. The lines of a spike already found
are no texture: their rises leave the yardstick, so every checkpoint that blocks the loop and
throws the loss up the same way is reported each time (issue 19: the seed's second spike, 0.7 ->
7.24 at step 4021, hid behind a first one that rose over two lines).

A divergence needs no history: a loss that climbs to ``DIVERGE_RATIO`` times its best value so far
(and ``DIVERGE_ABOVE`` times the highest before that best: back above where it started, so a
late climb that stays below that is left to the spike rule), then stays there for
``DIVERGE_STAYS`` lines, is one from
the run's second line on, however far apart its lines are (a warm-up divergence logged every 200
steps, 4.66 -> 67.2, lies inside the ``MIN_HISTORY`` lines spikes wait for). A gradient norm's
spike with the loss unmoved is a warning, not a loss incident (``severity``); a burst of them
``BURST`` lines apart is one incident, and one that starts inside a loss spike is part of it.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import bottleneck as bn
import numpy as np
import pandas as pd

from .. import keys
from ..ingest.writers import Writers, intervals

# The rules below are the one definition: queries/spikes.sql, cliffs.sql and divergences.sql
# receive them as parameters (SQL_PARAMS; their headers document the same defaults, which a
# test checks).
BASELINE = 20  # lines in the rolling baseline
MIN_BASELINE = 5  # lines needed before a stall is judged
MIN_HISTORY = 15  # values needed before a spike or cliff is judged: a verdict on a run's first
# few lines mistakes its fast early phase (a change of level) for an incident
BEFORE = 5  # lines before an incident searched for its causes
CLIFF_STAYS = 3  # lines a cliff must stay down to count
STALL_RATIO = 3.0  # interval / typical interval
STALL_MIN_EXCESS_S = 1.0
STALL_QUANTILE = 0.85  # the typical interval: this quantile of the BASELINE intervals before,
# not their median: a run with two speeds (SunXiaochuan-V1: 19 of 49 gaps ~20 s, the rest ~4 s)
# has a median of the fast ones, and its every slow gap would be a stall (issue 19, sweep F2);
# 0.85, not 0.8: 20 gaps of a 40%-slow run hold 4 or fewer slow ones one time in 20
EVAL_HISTORY = 5  # evaluation pauses whose median is the usual one: an evaluation pass every
# 500 steps adds ~8x the usual gap each time, a rhythm, not a stall (sweep F1); one is a stall
# only at STALL_RATIO times the usual evaluation pause (the first: times the training gap)
SPIKE_REL = 1.0  # at least 2x the baseline ...
SPIKE_SIGMAS = 8.0  # ... and this many noise scales above it
CLIFF_REL = 0.3  # at least 30% below the baseline ...
CLIFF_SIGMAS = 8.0
NOISE_FLOOR = 0.01  # the noise scale is at least this fraction of the baseline
SUDDEN = 0.5  # a spike: at least this fraction of its excess arrived in one line
SPIKE_HISTORY = 5000  # lines of the run's past whose sudden rises are a spike's yardstick:
# long enough to hold a heavy-tailed metric's rare large rises, bounded so live cost is flat
SPIKE_RANK = 2  # the yardstick is the second-largest of those rises ...
SPIKE_MARGIN = 3.0  # ... and a spike rises at least this many times as far
DIVERGE_RATIO = 4.0  # a divergence: at least this many times the best value so far ...
DIVERGE_ABOVE = 2.0  # ... and this many times the highest before that best: above all the run
# had shown (noise spans 0.0005-0.05 at a memorised run's tiny loss, 0-1 in uniform noise) ...
DIVERGE_STAYS = 3  # ... and the next this many lines stay there
BURST = BASELINE  # a gradient norm's spike this few lines after the last one's end joins it
GRAD_NORM_RATIO = 5.0  # a gradient norm's spike is at least this many times its baseline: the
# metric is heavy-tailed, a 2-3.5x bump is routine (megatron-ds-qwen7b's 44 against ~20 in
# warm-up, llm.c's 0.6-1.0 against 0.28), the spikes people call incidents are 10x and more
# (llm.c's 4.29 against 0.29 at step 8715, megatron-lm-llama1b's 85.8 against ~2)
GRAD_NORM = ("*grad*norm*", "gnorm")  # their spikes are warnings (the loss tells the damage)
SCHEDULE = ("lr", "*learning_rate*", "lr[-_/]*", "*[-_/]lr")  # set by the user: never diverge
LOOKAHEAD = {"stall": 0, "spike": 0, "cliff": CLIFF_STAYS, "nonfinite": 0,
             "divergence": DIVERGE_STAYS}
# The frame's own working columns start with a NUL: ingest/columns.py writes a control
# character in a key as its escape text, so no metric column can be named like these.
PRIVATE = "\x00"
CLOCK = PRIVATE + "clock"  # seconds, line by line (load.py fills it)
NONFINITE = PRIVATE + "nonfinite:"  # frame columns flagging NaN/inf (NULL is not non-finite)
NOT_METRICS = keys.NOT_METRICS | {CLOCK}  # frame columns that are no metric
TWO_WRITERS = "two_writers"  # a finding, not an incident of a metric: two processes print
# the log (ingest/writers.py), so its intervals are read per process
_SHARED = {"window": BASELINE, "min_lines": MIN_HISTORY, "floor": NOISE_FLOOR}
_SPIKES = {**_SHARED, "sigmas": SPIKE_SIGMAS, "ratio": 1.0 + SPIKE_REL, "sudden": SUDDEN,
           "history": SPIKE_HISTORY, "rank": SPIKE_RANK, "margin": SPIKE_MARGIN}
SQL_PARAMS = {  # the named queries' threshold parameters, from the rules above
    "spikes": _SPIKES,
    "cliffs": {**_SHARED, "sigmas": CLIFF_SIGMAS, "drop": CLIFF_REL, "stays": CLIFF_STAYS},
    # a gradient norm's spikes: queries/spikes.sql with ratio = GRAD_NORM_RATIO
    "grad_norm_spikes": {**_SPIKES, "ratio": GRAD_NORM_RATIO},
    "divergences": {"ratio": DIVERGE_RATIO, "above": DIVERGE_ABOVE, "stays": DIVERGE_STAYS},
    "stalls": {"min_ratio": STALL_RATIO, "min_excess_s": STALL_MIN_EXCESS_S,
               "quantile": STALL_QUANTILE, "window": BASELINE, "min_lines": MIN_BASELINE},
}


@dataclass
class Incident:
    run: str
    kind: str  # stall | spike | cliff | nonfinite | divergence
    metric: str
    step: int  # first affected logged step
    end_step: int
    value: float  # the episode's worst value: top of a spike, bottom of a cliff
    baseline: float | None
    line_id: int = 0  # metrics_all line_id (the order lines were logged) of the first affected line
    from_line_id: int = 0  # ... and of the line BEFORE lines earlier
    detail: dict = field(default_factory=dict)  # numbers the evidence quotes
    causes: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    open: bool = False  # its episode reaches the newest line and may grow
    end_line: int = 0
    level: float = 0.0  # the episode lasts while the metric is beyond this level
    worst_step: int | None = None  # the step of `value` (default: `step`)
    within: bool = False  # a gradient norm's spike that starts inside a loss spike: part of
    # that incident, so not reported (the detector still follows it, for its yardstick)

    def __post_init__(self) -> None:
        if self.worst_step is None:
            self.worst_step = self.step

    @property
    def key(self) -> tuple:
        return (self.run, self.kind, self.metric, self.step)

    @property
    def severity(self) -> str:
        return severity_of(self.kind, self.metric)


def is_grad_norm(metric: str) -> bool:
    return any(fnmatch.fnmatchcase(metric.lower(), p) for p in GRAD_NORM)


def is_schedule(metric: str) -> bool:
    """Whether ``metric`` is a learning rate (SCHEDULE): set by the user, never an incident."""
    return any(fnmatch.fnmatchcase(metric.lower(), p) for p in SCHEDULE)


def severity_of(kind: str, metric: str) -> str:
    """"warning" for a gradient norm's spike (the loss, judged on its own, says whether it did
    harm), "critical" for every other incident."""
    if kind == TWO_WRITERS:
        return "info"
    return "warning" if kind == "spike" and is_grad_norm(metric) else "critical"


class Watch:
    """Which metrics are loss-like (spikes) and accuracy-like (cliffs)."""

    def __init__(self, loss: str = "loss,*loss*,grad_norm", accuracy: str = "accuracy,*acc*"):
        self.loss = [p.strip() for p in loss.split(",") if p.strip()]
        self.accuracy = [p.strip() for p in accuracy.split(",") if p.strip()]

    def kind_of(self, metric: str) -> str | None:
        name = metric.lower()
        if any(fnmatch.fnmatchcase(name, p) for p in self.accuracy):
            return "cliff"
        if any(fnmatch.fnmatchcase(name, p) for p in self.loss):
            return "spike"
        return None

    def diverges(self, metric: str) -> bool:
        """Whether a loss-like metric is judged for divergence too: not a gradient norm (its
        spikes are warnings) nor a learning rate (its warm-up is a planned climb)."""
        return (self.kind_of(metric) == "spike" and not is_grad_norm(metric)
                and not is_schedule(metric))


def trailing_median(values: np.ndarray, window: int = BASELINE,
                    min_lines: int = MIN_BASELINE) -> np.ndarray:
    """Median of the ``window`` values before each position, skipping NaN; NaN until
    ``min_lines`` values are there."""
    if not len(values):
        return values
    window = min(window, len(values))  # bottleneck wants window <= length; same medians
    moving = bn.move_median(values, window, min_count=min(min_lines, window))
    present = np.isfinite(values).astype(np.float64)  # bottleneck is slow on bool arrays
    moving = np.where(bn.move_sum(present, window, min_count=1) >= min_lines, moving, np.nan)
    return np.concatenate([[np.nan], moving[:-1]])


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def trailing_iqr(values: np.ndarray, window: int) -> np.ndarray:
    """Interquartile range of the ``window`` values before each position (NaN skipped)."""
    rolling = pd.Series(values).rolling(window, min_periods=1)
    iqr = (rolling.quantile(0.75) - rolling.quantile(0.25)).to_numpy()
    return np.concatenate([[np.nan], iqr[:-1]])


def noise_scale(values: np.ndarray, median: np.ndarray, rules: dict) -> np.ndarray:
    """A robust noise scale, the larger of two standard-deviation estimates: the trailing
    median of line-to-line changes (1.4826 / sqrt(2) of it, for white noise) and the trailing
    interquartile range (/ 1.349). The first alone is small by chance now and then in pure noise
    (a few short changes in a row); the second alone is large on a trend. At least ``floor`` of
    the level; NaN (no verdict) until enough changes are known."""
    jumps = trailing_median(np.abs(np.diff(values, prepend=np.nan)), rules["window"],
                            rules["min_lines"])
    spread = trailing_iqr(values, rules["window"]) / 1.349
    return np.maximum(np.maximum(jumps * (1.4826 / np.sqrt(2.0)), spread),
                      rules["floor"] * np.abs(median))


def rises(values: np.ndarray, median: np.ndarray, sudden: float) -> np.ndarray:
    """Each line's sudden rise: how far it is above its baseline, where at least ``sudden`` of
    that arrived in one line (as a spike's must); NaN on every other line."""
    excess = values - median
    with np.errstate(invalid="ignore"):
        rose = (excess > 0) & (np.diff(values, prepend=np.nan) > sudden * excess)
    return np.where(rose, excess, np.nan)


def usual_rise(rise: np.ndarray, lines: np.ndarray, rules: dict) -> np.ndarray:
    """The yardstick at each of ``lines``: the ``rank``-th largest rise of the ``history`` lines
    before it (NaN with fewer rises: no yardstick yet). Only a candidate needs it, so it is
    computed line by line, not rolled over the whole run."""
    history, rank = int(rules["history"]), int(rules["rank"])
    out = np.full(len(lines), np.nan)
    for i, line in enumerate(lines):
        past = rise[max(0, line - history):line]
        past = past[~np.isnan(past)]
        if len(past) >= rank:
            out[i] = np.partition(past, len(past) - rank)[len(past) - rank]
    return out


def shift_mask(kind: str, values: np.ndarray, rules: dict | None = None, start: int = 0,
               rise: np.ndarray | None = None, rise_at: int = 0) -> tuple:
    """The spike (up) or cliff (down) rule for every line of one metric: (values with
    non-finite as NaN, whether the line is beyond the threshold, the baseline, and the level
    the episode lasts beyond). ``rules``: SQL_PARAMS["spikes"] or ["cliffs"] (the default).
    Only lines from ``start`` on are judged (the others read as not beyond): the rule reads
    ``window`` lines back, and for a spike ``history`` lines of ``rise`` (rises(); computed
    here when not given), so a caller that judges a run's newest lines passes what it kept,
    with the index in ``rise`` of ``values``' first line (``rise_at``). This is the rule in
    one pass, as the named queries apply it; the detector also takes a spike's own lines out
    of the rises later lines are measured against (RunDetector._spikes)."""
    rules = rules or SQL_PARAMS["spikes" if kind == "spike" else "cliffs"]
    values, median, threshold, ok = local_shift(kind, values, rules, start)
    sign = 1.0 if kind == "spike" else -1.0  # spikes go up, cliffs go down
    with np.errstate(invalid="ignore"):
        if kind == "spike":  # the bar the run's history sets, where the rest is met
            lines = np.flatnonzero(ok & (values - median > threshold))
            if len(lines):
                if rise is None:
                    rise = rises(values, trailing_median(values, rules["window"],
                                                         rules["min_lines"]), rules["sudden"])
                bar = rules["margin"] * usual_rise(rise, lines + rise_at, rules)
                threshold[lines] = np.fmax(threshold[lines], bar)
        mask = ok & (sign * (values - median) > threshold)
    return values, mask, median, median + sign * 0.5 * threshold


def local_shift(kind: str, values: np.ndarray, rules: dict, start: int = 0) -> tuple:
    """The spike or cliff rule without the bar a run's history sets: (values with non-finite
    as NaN, baseline, threshold, whether the line has the shape: sudden, or staying down), for
    the lines from ``start`` on (earlier ones read as not judged)."""
    values = np.where(np.isfinite(values), values, np.nan)
    first = max(0, start - int(rules["window"]) - 1)  # the lines the rule reads back
    median, threshold = np.full(len(values), np.nan), np.full(len(values), np.nan)
    ok = np.zeros(len(values), dtype=bool)
    median[first:], threshold[first:], ok[first:] = _local_rule(kind, values[first:], rules)
    ok[:start] = False
    return values, median, threshold, ok


def _local_rule(kind: str, values: np.ndarray, rules: dict) -> tuple:
    """What the ``window`` lines around each line say: (baseline, threshold, whether the line
    is a sudden rise (spike) or stays down for ``stays`` lines (cliff))."""
    median = trailing_median(values, rules["window"], rules["min_lines"])
    scale = noise_scale(values, median, rules)
    sign = 1.0 if kind == "spike" else -1.0
    rel = rules["ratio"] - 1.0 if kind == "spike" else rules["drop"]
    threshold = np.maximum(rules["sigmas"] * scale, rel * np.abs(median))
    excess = sign * (values - median)
    with np.errstate(invalid="ignore"):
        if kind == "spike":  # sudden: most of the excess arrived in one line
            return median, threshold, np.diff(values, prepend=np.nan) > rules["sudden"] * excess
        level = median - 0.5 * threshold
        ok = np.ones(len(values), dtype=bool)
        for k in range(1, rules["stays"] + 1):  # and it stays down
            ahead = np.full(len(values), np.nan)
            ahead[:max(len(values) - k, 0)] = values[k:]
            ok &= ahead < level
    return median, threshold, ok


def divergence_mask(values: np.ndarray, bad: np.ndarray, carried: tuple | None = None,
                    rules: dict | None = None) -> tuple:
    """The divergence rule for every line of one metric (``values``: NaN where not logged or
    not finite, ``bad``: where not finite): (whether it holds, the best value before each
    line, the level the episode lasts above, best_and_high's carry). The last ``stays`` lines
    read as not holding: what follows them is not known yet. ``carried``: best_and_high's
    carry for the lines before ``values``' first; ``rules``: SQL_PARAMS["divergences"]."""
    rules = rules or SQL_PARAMS["divergences"]
    best, high, state = best_and_high(values, carried)
    level = np.fmax(rules["ratio"] * best, rules["above"] * high)
    with np.errstate(invalid="ignore"):
        hit = (best > 0) & (values >= level)
        logged = np.zeros(len(values), dtype=bool)
        for k in range(1, int(rules["stays"]) + 1) if hit.any() else ():  # mostly none
            later = _ahead(values, k, np.nan)
            hit &= ~np.isfinite(later) | (later >= level)
            logged |= np.isfinite(later) | _ahead(bad, k, False)
    hit &= logged
    hit[max(0, len(values) - int(rules["stays"])):] = False
    return hit, best, level, state


def _ahead(values: np.ndarray, k: int, fill) -> np.ndarray:
    """``values`` k lines later (``fill`` past the end)."""
    out = np.full(len(values), fill, dtype=values.dtype)
    out[:max(len(values) - k, 0)] = values[k:]
    return out


def best_and_high(values: np.ndarray, carried: tuple | None) -> tuple:
    """Per line, the best (lowest) value before it and the highest value before that best
    (-inf while the best is the first value), NaN skipped; and a function giving what to carry
    to the lines after the first k: (best, highest before it, highest), as ``carried`` was for
    these lines."""
    lo0, hb0, hi0 = carried or (np.inf, -np.inf, -np.inf)
    low = np.fmin.accumulate(np.concatenate([[lo0], values]))  # low[j]: min before line j
    top = np.fmax.accumulate(np.concatenate([[hi0], values]))  # top[j]: max before line j
    at = np.arange(len(values) + 1)
    with np.errstate(invalid="ignore"):
        record = np.concatenate([[True], values < low[:-1]])  # a new best at line j - 1
    before = np.concatenate([[hb0], top[:-1]])  # the highest before that new best
    high = before[np.maximum.accumulate(np.where(record, at, 0))]
    return low[:-1], high[:-1], lambda k: (float(low[k]), float(high[k]), float(top[k]))


class RunDetector:
    """Keeps just enough of one run's recent lines to judge the next ones."""

    def __init__(self, run: str, watch: Watch):
        self.run, self.watch = run, watch
        self.frame = pd.DataFrame()  # recent lines: step, CLOCK, attempt, metrics
        self.base = 0  # line number of frame's first row
        self.frontier = dict.fromkeys(LOOKAHEAD, 0)  # first undecided line per kind
        self.open: dict[tuple[str, str], Incident] = {}
        self.last_end: dict[tuple[str, str], int] = {}
        # per spike metric, the rise (see rises()) of each line from rise_base on: a spike's
        # yardstick reads SPIKE_HISTORY lines back, the frame only BASELINE
        self.rises: dict[str, np.ndarray] = {}
        self.rise_base = 0
        # per spike metric, the [first, last] lines of its spikes' episodes: their rises are no
        # texture (see _hush), and no divergence starts inside one (it is that spike)
        self.quiet: dict[str, list[list[int]]] = {}
        self.latest: dict[str, Incident] = {}  # per gradient norm, its last spike (BURST)
        # per diverging metric, its best and worst finite value before the divergence frontier
        self.extremes: dict[str, tuple[float, float]] = {}
        self.pauses: list[float] = []  # the last EVAL_HISTORY evaluation pauses (seconds)
        self.evaluated = None  # feed's: whether an evaluation row lies between two steps
        self.writers = Writers()  # who printed the lines so far (ingest/writers.py) ...
        self.interval = np.empty(0)  # ... and each frame line's seconds since the line before
        # of its writer (an array beside the frame: a column costs a pandas copy a tick)

    def feed(self, batch: pd.DataFrame, evaluated=None) -> list[Incident]:
        """Judge the new lines; returns incidents found or grown by them. ``evaluated(lo, hi)``:
        whether the run logged an evaluation row at a step from lo to below hi (load.evaluated;
        None: no evaluation rows are known)."""
        if batch.empty:
            return []
        self.evaluated = evaluated
        interval, two = self._writers(batch)
        self.frame = pd.concat([self.frame, batch], ignore_index=True)
        self.interval = np.concatenate([self.interval, interval])
        n = self.base + len(self.frame)
        changed = self._grow_open(n) + self._two_writers(two)
        changed += self._stalls(n)
        for metric in self._metrics():
            kind = self.watch.kind_of(metric)
            if kind == "spike":
                changed += self._spikes(metric, n)
            elif kind:
                changed += self._level_shift(kind, metric, n)
            if self.watch.diverges(metric):
                changed += self._divergence(metric, n)
            if kind and self._has_nonfinite(metric):  # a watched one: a NaN elsewhere (a
                # timing average's 0/0 before it has a step, as modded-nanogpt's step_avg) is
                # the nonfinite alert rule's business, with its own metric globs
                changed += self._nonfinite(metric, n)
        for kind, ahead in LOOKAHEAD.items():
            self.frontier[kind] = max(self.frontier[kind], n - ahead)
        self._trim()
        return changed

    # ---- frame helpers --------------------------------------------------------------------

    def _metrics(self) -> list[str]:
        """The frame's metrics, gradient norms last: whether a loss spike holds a line is
        known when a gradient norm's spike there is judged."""
        return sorted((c for c in self.frame.columns
                       if c not in NOT_METRICS and not c.startswith(NONFINITE)), key=is_grad_norm)

    def _has_nonfinite(self, metric: str) -> bool:
        return NONFINITE + metric in self.frame.columns

    def _pos(self, line: int) -> int:
        return line - self.base

    def _step(self, line: int) -> int:
        return int(self.frame["step"].iat[self._pos(line)])

    def _context(self, line: int) -> dict:
        """Where an incident at ``line`` sits: its line id, and the line BEFORE lines earlier,
        where the search for causes starts."""
        ids = self.frame["line_id"]
        earlier = max(self.base, line - BEFORE)
        return {"line_id": int(ids.iat[self._pos(line)]),
                "from_line_id": int(ids.iat[self._pos(earlier)]), "end_line": line}

    def _trim(self) -> None:
        """Keep what the next lines are judged from: the baseline's lines, and the rises a
        spike's yardstick reads (kept, not computed again, so a tick costs what its lines do)."""
        undecided = min(self.frontier.values())
        drop = undecided - BASELINE - 2 - self.base
        if drop > 0:
            self.frame = self.frame.iloc[drop:].reset_index(drop=True)
            self.interval = self.interval[drop:]
            self.base += drop
        drop = undecided - SPIKE_HISTORY - self.rise_base
        if drop > 0:
            self.rises = {m: rise[drop:] for m, rise in self.rises.items()}
            self.rise_base += drop
            self.quiet = {m: [r for r in ranges if r[1] >= self.rise_base]
                          for m, ranges in self.quiet.items()}

    def _candidates(self, kind: str, mask: np.ndarray, n: int, ahead: int) -> np.ndarray:
        start = self.frontier[kind] - self.base
        stop = n - ahead - self.base
        hits = np.flatnonzero(mask[max(start, 0):max(stop, 0)]) + max(start, 0)
        return hits + self.base

    # ---- stalls -----------------------------------------------------------------------------

    def _writers(self, batch: pd.DataFrame) -> tuple[np.ndarray, int | None]:
        """Each new line's interval on its own writer's clock (two processes may print one
        log, each with its own clock: an interval across them is no interval), and the line
        where two writers were first seen, if in this batch."""
        clock = (batch[CLOCK].to_numpy(dtype=float) if CLOCK in batch
                 else np.full(len(batch), np.nan))
        dt, two = intervals(self.writers, batch["step"].to_numpy(), clock)
        start = self.base + len(self.frame)
        return np.asarray(dt, dtype=float), None if two is None else start + two

    def _two_writers(self, line: int | None) -> list[Incident]:
        """Said once per run: what explains its repeated steps, and why its intervals are read
        per process."""
        if line is None:
            return []
        step = self._step(line)
        said = (f"two processes write this log: from step {step} on its steps come twice, each "
                "copy with its own clock (two ranks printing, or a relaunch while the old "
                "process still ran); intervals are judged per process and a repeated step "
                "starts no attempt (inferred: the steps and clocks of its lines)")
        return [Incident(self.run, TWO_WRITERS, "step", step, step, 2.0, None,
                         causes=[TWO_WRITERS], evidence=[said], **self._context(line))]

    def _stalls(self, n: int) -> list[Incident]:
        """Gaps STALL_RATIO times the typical one. A gap that held an evaluation pass (an
        evaluation row at a step from the line before's, the step a trainer logs before it
        evaluates, to below its own) is an evaluation pause: judged again against the run's
        earlier pauses, as a person reads a routine evaluation every N steps."""
        if CLOCK not in self.frame or self.frame[CLOCK].isna().all():
            return []
        attempt = self.frame["attempt"].to_numpy()
        steps = self.frame["step"].to_numpy(dtype=float)
        same = np.concatenate([[False], attempt[1:] == attempt[:-1]])
        dt = np.where(same, self.interval, np.nan)
        dsteps = np.where(same, np.diff(steps, prepend=np.nan), np.nan)
        typical = trailing_median(dt)
        with np.errstate(invalid="ignore"):
            mask = (dt > STALL_RATIO * typical) & (dt - typical > STALL_MIN_EXCESS_S)
        # the quantile is at or above the median: only a gap that stands out from the median
        # can stand out from it, and only for those is it computed (a rolling quantile over a
        # whole run costs ten times the median's)
        for p in np.flatnonzero(mask):
            typical[p] = np.quantile(_finite(dt[max(p - BASELINE, 0):p]), STALL_QUANTILE)
        with np.errstate(invalid="ignore"):
            mask &= (dt > STALL_RATIO * typical) & (dt - typical > STALL_MIN_EXCESS_S)
        found = []
        for line in self._candidates("stall", mask, n, 0):
            p = self._pos(line)
            baseline = self._pause_baseline(steps, p, float(dt[p]), float(typical[p]))
            if baseline is None:
                continue
            found.append(Incident(
                self.run, "stall", keys.GAP, self._step(line), self._step(line),
                float(dt[p]), baseline, **self._context(line),
                detail={"steps": int(dsteps[p])}))
        return found

    def _pause_baseline(self, steps: np.ndarray, p: int, gap: float,
                        typical: float) -> float | None:
        """The yardstick of the gap before line ``p``, or None when it is no stall: the training
        gaps' for a training gap; for an evaluation pause the median of the EVAL_HISTORY pauses
        before it (the run's first has none: the training gaps'). Candidates come once each,
        in order, so batches of any size give the same yardsticks."""
        if self.evaluated is None or not self.evaluated(int(steps[p - 1]), int(steps[p])):
            return typical
        usual = float(np.median(self.pauses[-EVAL_HISTORY:])) if self.pauses else typical
        self.pauses = [*self.pauses[-EVAL_HISTORY + 1:], gap]
        if gap > STALL_RATIO * usual and gap - usual > STALL_MIN_EXCESS_S:
            return usual
        return None

    def _rise(self, metric: str, values: np.ndarray) -> np.ndarray:
        """The rises of ``metric`` from rise_base on, the frame's new lines' computed now (from
        them and the baseline's lines before them). A metric first seen now had no value
        before the frame's lines (its column came with them)."""
        known = self.rises.get(metric)
        if known is None:
            known = np.full(self.base - self.rise_base, np.nan)
        new = self.rise_base + len(known) - self.base  # frame row of the first line not known
        if new < len(values):
            first = max(0, new - BASELINE - 1)
            part = np.where(np.isfinite(values[first:]), values[first:], np.nan)
            rules = SQL_PARAMS["spikes"]
            rise = rises(part, trailing_median(part, rules["window"], rules["min_lines"]),
                         rules["sudden"])
            known = np.concatenate([known, rise[new - first:]])
        self.rises[metric] = known
        self._hush(metric)
        return known

    def _hush(self, metric: str) -> None:
        """No rise of a line inside a spike's episode is texture: it leaves the yardstick."""
        known = self.rises.get(metric)
        for lo, hi in self.quiet.get(metric, ()):
            if known is not None:
                known[max(lo - self.rise_base, 0):max(hi + 1 - self.rise_base, 0)] = np.nan

    def _spikes(self, metric: str, n: int) -> list[Incident]:
        """The spike rule line by line in the order logged: a spike found takes its lines out
        of the yardstick of the lines after it, in this batch as in later ones."""
        rules = SQL_PARAMS["grad_norm_spikes" if is_grad_norm(metric) else "spikes"]
        values = self.frame[metric].to_numpy(dtype=float, na_value=np.nan)
        start = max(0, self.frontier["spike"] - self.base)  # the lines not judged yet
        self._rise(metric, values)  # kept, with the lines of spikes found left out
        values, median, threshold, ok = local_shift("spike", values, rules, start)
        with np.errstate(invalid="ignore"):
            ok &= values - median > threshold
        found: list[Incident] = []
        for line in self._candidates("spike", ok, n, 0):
            if line <= self.last_end.get(("spike", metric), -1):
                continue
            p = self._pos(line)
            bar = rules["margin"] * usual_rise(self.rises[metric], np.array(
                [line - self.rise_base]), rules)[0]
            height = max(threshold[p], bar) if np.isfinite(bar) else threshold[p]
            if not values[p] - median[p] > height:
                continue
            within = is_grad_norm(metric) and self._in_loss_spike(line)
            incident = self._burst(metric, line, within)
            if incident is None:
                incident = Incident(self.run, "spike", metric, self._step(line),
                                    self._step(line), float(values[p]), float(median[p]),
                                    **self._context(line), within=within)
            incident.level = float(median[p] + 0.5 * height)
            self._extend(incident, n)
            if not incident.within and all(i is not incident for i in found):
                found.append(incident)
        return found

    def _in_loss_spike(self, line: int) -> bool:
        """Whether a spike of a loss-like metric other than a gradient norm holds ``line``."""
        return any(lo <= line <= hi for metric, ranges in self.quiet.items()
                   if not is_grad_norm(metric) for lo, hi in ranges)

    def _burst(self, metric: str, line: int, within: bool) -> Incident | None:
        """A gradient norm's last spike, when this one (at ``line``) follows it closely: the
        burst is one incident, grown over this spike's lines. One outside a loss spike is
        reported, so it never joins a spike that was part of one (``within``)."""
        last = self.latest.get(metric)
        if last is None or line - last.end_line > BURST or (last.within and not within):
            return None
        self._note_worst(last, line)
        last.end_line = line
        return last

    def _level_shift(self, kind: str, metric: str, n: int) -> list[Incident]:
        values = self.frame[metric].to_numpy(dtype=float, na_value=np.nan)
        start = max(0, self.frontier[kind] - self.base)  # the lines not judged yet
        rise = self._rise(metric, values) if kind == "spike" else None
        values, mask, median, level = shift_mask(kind, values, start=start, rise=rise,
                                                 rise_at=self.base - self.rise_base)
        found = []
        for line in self._candidates(kind, mask, n, LOOKAHEAD[kind]):
            if line <= self.last_end.get((kind, metric), -1):
                continue
            p = self._pos(line)
            incident = Incident(self.run, kind, metric, self._step(line), self._step(line),
                                float(values[p]), float(median[p]), **self._context(line),
                                level=float(level[p]))
            self._extend(incident, n)
            found.append(incident)
        return found

    def _divergence(self, metric: str, n: int) -> list[Incident]:
        """Lines from the divergence frontier on at DIVERGE_RATIO times the best finite value
        before them (a positive one) and DIVERGE_ABOVE times the highest before that best,
        where each of the next DIVERGE_STAYS lines that logs the metric stays there (a
        non-finite value counts: a diverged loss ends in NaN) and one at least does."""
        start = self.frontier["divergence"] - self.base
        values = self.frame[metric].to_numpy(dtype=float, na_value=np.nan)[start:]
        bad = (self.frame[NONFINITE + metric].eq(True).to_numpy()[start:]
               if self._has_nonfinite(metric) else np.zeros(len(values), dtype=bool))
        values = np.where(bad, np.nan, values)  # NaN: not finite or not logged
        hit, best, level, state = divergence_mask(values, bad, self.extremes.get(metric))
        done = max(0, len(values) - DIVERGE_STAYS)  # the lines decided now
        self.extremes[metric] = state(done)  # ... whose values the next lines' bars include
        found = []
        for i in np.flatnonzero(hit[:done]):
            line = self.base + start + int(i)
            if line <= self.last_end.get(("divergence", metric), -1) or self._in_spike(
                    metric, line):
                continue
            incident = Incident(self.run, "divergence", metric, self._step(line),
                                self._step(line), float(values[i]), float(best[i]),
                                **self._context(line), level=float(level[i]))
            self._extend(incident, n)
            found.append(incident)
        return found

    def _in_spike(self, metric: str, line: int) -> bool:
        return any(lo <= line <= hi for lo, hi in self.quiet.get(metric, ()))

    def _beyond(self, incident: Incident, p: int) -> bool:
        if incident.kind == "nonfinite":
            if not self._has_nonfinite(incident.metric):
                return False
            flag = self.frame[NONFINITE + incident.metric].iat[p]
            return bool(flag) if isinstance(flag, (bool, np.bool_)) else False
        value = self.frame[incident.metric].iat[p]
        if not np.isfinite(value):
            return True
        return value < incident.level if incident.kind == "cliff" else value > incident.level

    def _extend(self, incident: Incident, n: int) -> None:
        """Grow the episode over the lines known so far; it stays open if it reaches the
        newest line."""
        first = line = incident.end_line + 1
        while line < n and self._beyond(incident, self._pos(line)):
            self._note_worst(incident, line)
            line += 1
        incident.end_line = line - 1
        incident.end_step = self._step(incident.end_line)
        incident.open = line == n
        key = (incident.kind, incident.metric)
        if incident.kind == "spike":
            self._quiet(incident.metric, first - 1, incident.end_line)
            if is_grad_norm(incident.metric):
                self.latest[incident.metric] = incident
        self.last_end[key] = incident.end_line
        if incident.open:
            self.open[key] = incident
        else:
            self.open.pop(key, None)

    def _quiet(self, metric: str, lo: int, hi: int) -> None:
        """Lines ``lo`` to ``hi`` belong to a spike: their rises leave the yardstick."""
        ranges = self.quiet.setdefault(metric, [])
        if ranges and ranges[-1][1] >= lo - 1:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
        self._hush(metric)

    def _note_worst(self, incident: Incident, line: int) -> None:
        """Keep the episode's worst finite value and its step (a non-finite line is the
        nonfinite kind's incident, not a size)."""
        if incident.kind not in ("spike", "cliff", "divergence"):
            return
        value = float(self.frame[incident.metric].iat[self._pos(line)])
        worse = value < incident.value if incident.kind == "cliff" else value > incident.value
        if np.isfinite(value) and worse:
            incident.value, incident.worst_step = value, self._step(line)

    def _grow_open(self, n: int) -> list[Incident]:
        grown = []
        for incident in list(self.open.values()):
            before = incident.end_line
            self._extend(incident, n)
            if (incident.end_line != before or not incident.open) and not incident.within:
                grown.append(incident)
        return grown

    # ---- non-finite values ------------------------------------------------------------------

    def _nonfinite(self, metric: str, n: int) -> list[Incident]:
        values = self.frame[metric].astype("float64")
        bad = self.frame[NONFINITE + metric].eq(True).to_numpy()
        found = []
        for line in self._candidates("nonfinite", bad, n, 0):
            if line <= self.last_end.get(("nonfinite", metric), -1):
                continue
            p = self._pos(line)
            recent = values.iloc[max(0, p - BASELINE):p]
            finite = recent[np.isfinite(recent)]
            incident = Incident(self.run, "nonfinite", metric, self._step(line),
                                self._step(line), float(values.iat[p]),
                                float(finite.iat[-1]) if len(finite) else None,
                                **self._context(line))
            self._extend(incident, n)
            found.append(incident)
        return found
