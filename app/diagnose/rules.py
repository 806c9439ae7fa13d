"""What diagnosis calls an incident: the thresholds (one definition: queries/spikes.sql,
cliffs.sql, divergences.sql and stalls.sql receive them as SQL_PARAMS), the ``Incident`` it
reports, which metrics are loss-like and accuracy-like (``Watch``), and how severe each kind
is. ``detect.py`` says how the rules read a run's lines."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from .. import keys

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


# an incident's JSON shape (diagnose --json, /api/incidents), in this order
KEYS = ("run", "kind", "metric", "step", "end_step", "worst_step", "value", "baseline", "causes",
        "evidence")


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
        # case-blind (settings.py says so): "Train/Loss" names the run's train/loss
        self.loss = [p.strip().lower() for p in loss.split(",") if p.strip()]
        self.accuracy = [p.strip().lower() for p in accuracy.split(",") if p.strip()]

    @classmethod
    def of(cls, settings) -> Watch:
        """The metrics a server's ``settings`` name (loss_metrics, accuracy_metrics): what
        diagnosis judges, the alert rules watch and the Run page draws by default."""
        return cls(settings.loss_metrics, settings.accuracy_metrics)

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

    def stand_in(self, metric: str, names: list[str]) -> str | None:
        """A run's own metric to show for ``metric`` where it logs none of that name: one of
        the same kind (a loss for a loss) whose last word is ``metric``, a training one before
        the others. The "loss" of a TensorBoard run is its ``train/loss``, of a Lightning CSV
        its ``train_loss``; a metric diagnosis does not watch has none (Compare draws it, the
        Runs table shows its newest value)::

            Watch().stand_in("loss", ["train/loss", "val/loss", "lr"])  ->  "train/loss"
            Watch().stand_in("lr", ["train/lr"])                        ->  None
        """
        return next(iter(self.stand_ins(metric, names)), None)

    def stand_ins(self, metric: str, names: list[str]) -> list[str]:
        """Every name stand_in() could choose, its choice first."""
        kind = self.kind_of(metric)
        if kind is None:
            return []
        word = metric.lower()
        same = [n for n in names
                if self.kind_of(n) == kind and re.split(r"[/_.\-]", n.lower())[-1] == word]
        return sorted(same, key=lambda n: ("train" not in n.lower(), len(n), n))
