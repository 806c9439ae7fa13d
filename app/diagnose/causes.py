"""Likely causes of an incident, ranked, each with a sentence that quotes the numbers.

Vocabulary (most likely first when several apply):

- ``checkpoint``: a checkpoint event in the lines just before (or inside the gap of a stall),
  logged or inferred (a save_steps, a checkpoint folder that appeared: evidence.of_event),
  else checkpoint-like disk writes in system.jsonl inside that gap (system.disk);
- ``resume``: a new attempt (the run was restarted from a checkpoint) just before, with the
  signs seen (attempts.reason: the step, the clock or the epoch went back, a resume event);
  a resume event explains only the lines of the attempt it opens (``_opened_by``), never
  lines logged before it at the same steps (a later launch's "resumed from step 5500" is
  not the cause of the spike the first launch logged at 5501-5650 before it crashed);
- ``evaluation``: an evaluation pass at the steps of a stall's gap: one the log announced
  (``eval_start`` / ``eval_end`` events, as cliffwatch's callbacks write them, quoting its
  seconds), else evaluation rows (table evals); it comes before a save logged in the same gap
  where it took longer than the save blocked the loop. An evaluation row is no cause when the
  evaluations before it took no pause (``ROUTINE``): an eval scalar logged every 100 steps
  sat in one unexplained 45 s gap of a TensorBoard log whose 14 other evaluations cost
  nothing, and was named its cause;
- ``swap``, ``input_wait``, ``gpu_memory``: what system.jsonl says the machine did inside a
  stall's gap: swap in use grew; the GPUs idled with the input queue empty, or one core was
  pegged; a GPU's memory was near its total (system.py);
- ``periodic``: a stall that recurs every N steps (three in a row at even spacing, at least
  PERIODIC_INTERVALS logging intervals apart), named even when nothing was logged about it,
  "like periodic evaluations" where an evaluation row lies in its gap;
- ``stall``: a stall just before, with no checkpoint event to explain it;
- ``bucket_homogeneity``: a long run of micro-batches from one length bucket just before;
- ``epoch_boundary``: an epoch began just before (event, ``epoch`` field, or steps_per_epoch);
- ``learning_rate``: the lr rising in warm-up, at its peak right after warm-up, or just risen
  (schedule.py), for a spike or divergence;
- ``grad_norm``: a gradient norm's spike in the lines before a loss incident;
- ``unknown``: none of these.

Each sentence ends with whether its cause was logged or inferred, and from what (evidence.py).

A straggler (a slow rank, ``straggler.py``) is judged from the rank files, not these lines: its
causes are ``input_wait`` (its input pipeline's wait explains the lost time, as system.jsonl's
idle GPUs or pegged core do for a stall) and
``slow_rank`` (which rank, by how much, since when), given by ``straggler.explain``.

For example the seed's spike at step 2029 reads::

    checkpoint: checkpoint at step 2000 blocked the training loop for 155.2 s, 2 lines before
    step 2029. (logged: events.jsonl)
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .. import keys
from ..db import queries
from . import schedule, system
from .detect import BEFORE, SCHEDULE, Incident, is_grad_norm
from .evidence import lines_before, of_event, seconds, sourced
from .rules import EVAL_HISTORY, STALL_RATIO

BUCKET_RUN_MIN = 16  # micro-batches from one bucket before it counts ...
BUCKET_RUN_TIMES_TYPICAL = 3.0  # ... and this many times the run's 99th percentile
TIME_SLACK_S = 1.0  # an event's clock and its lines' may differ by a rounding
PERIODIC_MIN = 3  # stalls in a row at even spacing: periodic ...
PERIODIC_SPREAD = 0.1  # ... their intervals within this fraction of each other ...
PERIODIC_INTERVALS = 3  # ... and at least this many logging intervals apart: stalls every
# logged line or two are the run's pace, not a period (SunXiaochuan-V1's "every ~5 steps",
# its logging interval; issue 19, sweep R4)
SIGNS = {"step_back": "the step went back", "clock_back": "the time field went back",
         "epoch_reset": "the epoch field went back to 0", "resume_event": "a resume event",
         "file_truncated": "the log was truncated", "file_replaced": "the log was replaced"}
LOGGED_SIGNS = {"resume_event"}  # the others are cliffwatch's conclusions
# the evaluations a run must have logged before one that held a gap, for their pauses to say
# whether its evaluations take time (_took_no_pause)
ROUTINE = 3
EVAL_EVENTS = ("eval_start", "eval_end")  # an evaluation pass the log announced (callbacks)


class Attempt(NamedTuple):
    """A row of table attempts: where it began, where the one before ended, and why."""
    start_step: int
    prev_step: int | None
    reason: str


@dataclass
class RunContext:
    events: list[dict]
    lines: pd.DataFrame  # line_id, step, attempt, epoch, time
    steps_per_epoch: int | None
    bucket_runs: np.ndarray  # per line: longest same-bucket run (micro-batches) ending there
    run_bucket: np.ndarray  # ... and its bucket id
    typical_run: float  # 99th percentile of the run's same-bucket run lengths
    lr_name: str | None = None  # the lr column schedule.COLUMNS of lines come from
    evals: list[dict] = field(default_factory=list)  # evaluation rows at the lines' steps
    attempts: dict[int, Attempt] = field(default_factory=dict)
    machine: system.Machine | None = None  # system.jsonl's samples around the lines
    # the gaps (s) around the run's last evaluations below a step (_eval_gaps)
    eval_gaps: Callable[[int], list[float]] | None = None

    def index(self, line_id: int) -> int:
        return int(np.searchsorted(self.lines["line_id"].to_numpy(), line_id))


def load_context(cursor, run: str) -> RunContext:
    """The whole run's context (whole-run diagnosis reads every line anyway)."""
    table = queries.arrow(cursor, "diagnose/run_context",
                          {"run": run, "schedule": list(SCHEDULE)})
    lr = schedule.Schedule()
    lines = pd.DataFrame({**{name: table[name].to_numpy(zero_copy_only=False)
                             for name in ("line_id", "step", "attempt", "epoch", "time")},
                          **lr.feed(table)})
    buckets = BucketRuns()
    runs, owners = buckets.feed(table["buckets"].combine_chunks())
    return RunContext(_events(cursor, "run_events", {"run": run}), lines,
                      steps_per_epoch(cursor, run), runs, owners, buckets.typical(), lr.name,
                      _evals(cursor, run, *keys.INT64), _attempts(cursor, run),
                      system.read(cursor, run), _eval_gaps(cursor, run))


def window_context(cursor, run: str, window: pd.DataFrame, lr_name: str | None = None,
                   evaluations: bool = True) -> RunContext:
    """The context of one incident from its window alone: ``window`` holds its lines
    (line_id, step, attempt, epoch, time, bucket_run, run_bucket, the last two as BucketRuns.feed
    gave them); events are read for the window's steps only, so the cost does not grow with
    the run. The run-wide figures (steps_per_epoch, typical_run) are left for the caller to
    fill in: they change as the run goes on, the window's lines and events do not.
    ``lr_name``: the column the window's schedule.COLUMNS come from. ``evaluations``: whether
    to read the evaluation rows (only a stall's causes read them: ONLY)."""
    # a resume event's step (its checkpoint's) can lie up to one log interval below the
    # first step its attempt logged (_opened_by)
    lo, hi = int(window["step"].min()), int(window["step"].max())
    params = {"run": run, "lo": lo - _resume_slack(window), "hi": hi}
    lines = window[["line_id", "step", "attempt", "epoch", "time",
                    *schedule.COLUMNS]].reset_index(drop=True)
    return RunContext(_events(cursor, "diagnose/run_events_between", params), lines,
                      None, window["bucket_run"].to_numpy(), window["run_bucket"].to_numpy(),
                      0.0, lr_name, _evals(cursor, run, lo, hi) if evaluations else [],
                      _attempts(cursor, run),
                      system.read(cursor, run, int(lines["line_id"].min()),
                                  int(lines["line_id"].max())),
                      _eval_gaps(cursor, run) if evaluations else None)


def _events(cursor, query: str, params: dict) -> list[dict]:
    return [{"kind": k, "step": s, "elapsed_s": e, "time": t, "data": json.loads(d or "{}")}
            for k, s, e, t, d in queries.execute(cursor, query, params).fetchall()]


def _evals(cursor, run: str, lo: int, hi: int) -> list[dict]:
    """Evaluation rows from step lo to hi: step and the metrics logged (no bookkeeping)."""
    table = queries.arrow(cursor, "diagnose/evals_between", {"run": run, "lo": lo, "hi": hi})
    skip = keys.NOT_METRICS | {"kind"}
    return [{k: v for k, v in row.items() if v is not None and (k == "step" or k not in skip)}
            for row in table.to_pylist()]


def _eval_gaps(cursor, run: str) -> Callable[[int], list[float]]:
    """The seconds between the lines around each of the run's last EVAL_HISTORY evaluations
    below a step, oldest first: read only for a stall whose gap holds an evaluation row."""
    def below(step: int) -> list[float]:
        rows = queries.execute(cursor, "diagnose/eval_gaps",
                               {"run": run, "before": step, "last": EVAL_HISTORY}).fetchall()
        return [float(gap) for _, gap in rows if gap is not None]
    return below


def _attempts(cursor, run: str) -> dict[int, Attempt]:
    rows = queries.execute(cursor, "diagnose/run_attempts", {"run": run}).fetchall()
    return {int(attempt): Attempt(int(start), prev, reason)
            for attempt, start, prev, reason in rows}


def steps_per_epoch(cursor, run: str) -> int | None:
    meta = next(iter(queries.execute(cursor, "run_meta", {"run": run}).fetchall()), None)
    return meta[2] if meta else None


class BucketRuns:
    """Same-bucket runs of micro-batches, fed the ``buckets`` of a run's lines in order (all at
    once or as they arrive, with the same answers): per line, the length and bucket of the run
    going on at its last micro-batch (carried over lines that log none), and the 99th
    percentile of all run lengths so far, kept as a histogram so that it costs nothing to
    keep up to date."""

    def __init__(self):
        self.finished: Counter[int] = Counter()  # length -> finished runs of that length
        self.bucket, self.length = -1, 0  # the run going on (-1: no micro-batch yet)

    def feed(self, per_line: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
        n = len(per_line)
        flat = per_line.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
        if not len(flat):
            return np.full(n, self.length, dtype=np.int64), np.full(n, self.bucket, np.int64)
        carried = self.length > 0 and flat[0] == self.bucket
        is_start = np.concatenate([[not carried], flat[1:] != flat[:-1]])
        starts = np.flatnonzero(is_start)
        run_of = np.cumsum(is_start) - 1  # -1: still the run carried in
        begun = starts[np.maximum(run_of, 0)] if len(starts) else 0
        so_far = np.where(run_of >= 0, np.arange(len(flat)) - begun,
                          self.length + np.arange(len(flat))) + 1
        ends = np.append(starts, len(flat))
        done = np.diff(ends)[:-1].tolist()  # every run begun here but the last one
        if self.length and not carried:
            done.append(self.length)
        elif self.length and len(starts):
            done.append(self.length + int(starts[0]))
        self.finished.update(done)
        counts = pc.fill_null(pc.list_value_length(per_line), 0).to_numpy(zero_copy_only=False)
        last = np.cumsum(counts) - 1  # each line's last micro-batch so far, -1 before any
        seen = last >= 0
        lengths = np.where(seen, so_far[np.maximum(last, 0)], self.length)
        owners = np.where(seen, flat[np.maximum(last, 0)], self.bucket)
        self.bucket, self.length = int(flat[-1]), int(so_far[-1])
        return lengths.astype(np.int64), owners.astype(np.int64)

    def typical(self) -> float:
        """np.percentile(lengths, 99) of every run so far, the one going on included."""
        counts = self.finished + Counter({self.length: 1} if self.length else {})
        if not counts:
            return 0.0
        values = np.array(sorted(counts), dtype=np.int64)
        cumulative = np.cumsum([counts[v] for v in values])
        return _linear_percentile(values, cumulative, 99)


def _linear_percentile(values: np.ndarray, cumulative: np.ndarray, q: float) -> float:
    """numpy's default ("linear") percentile, operation for operation, of the sorted sample
    in which ``values[i]`` occupies ranks up to ``cumulative[i]``."""
    n = int(cumulative[-1])
    virtual = (n - 1) * np.true_divide(q, 100)
    previous = int(np.floor(virtual))
    def at(rank: int) -> np.int64:
        return values[np.searchsorted(cumulative, rank, side="right")]
    if virtual >= n - 1:
        return float(values[-1])
    a, b, t = at(previous), at(previous + 1), virtual - previous
    diff = b - a
    return float(b - diff * (1 - t) if t >= 0.5 else a + diff * t)


def attribute(incident: Incident, ctx: RunContext, others: list[Incident]) -> None:
    """Fill ``incident.causes`` and ``incident.evidence``. ``others``: the run's other
    incidents found so far (its stalls and gradient-norm spikes are read)."""
    hi = ctx.index(incident.line_id)
    lo = hi - 1 if incident.kind == "stall" else ctx.index(incident.from_line_id)
    window = ctx.lines.iloc[max(lo, 0):hi + 1]
    found: dict[str, str] = {}
    ruled: dict[str, str] = {}  # causes a check ruled out, and why
    for cause, check in CHECKS:
        if incident.kind not in ONLY.get(cause, (incident.kind,)) or (
                cause == "stall" == incident.kind):
            continue
        if cause in SAVED and "checkpoint" in found:
            continue
        sentence = check(incident, ctx, window, others)
        if isinstance(sentence, RuledOut):
            ruled[cause] = sentence
        elif sentence:
            found[cause] = sentence
    if not found:
        found["unknown"] = _unexplained(incident, ruled)
    order = [*ORDER, "unknown"]
    if {"checkpoint", "evaluation"} <= found.keys() and _evaluation_first(incident, ctx, window):
        order.remove("evaluation")
        order.insert(order.index("checkpoint"), "evaluation")
    incident.causes = [c for c in order if c in found]
    incident.evidence = [found[c] for c in incident.causes]


class RuledOut(str):
    """A check's finding that rules its cause out (an evaluation row in a gap where the
    run's evaluations take no time): said when nothing else explains the incident."""


def _unexplained(incident, ruled: dict[str, str]) -> str:
    causes = ", ".join(c for c in ("checkpoint", "resume", "evaluation", "stall") if c not in ruled)
    return " ".join([f"nothing logged explains it: no {causes}, learning-rate change, epoch "
                     f"boundary or single-bucket run in the {BEFORE} lines before step "
                     f"{incident.step}.", *ruled.values()])


def _checkpoint(incident, ctx, window, others) -> str | None:
    event = _save_in(incident, ctx, window)
    if event is None:  # no save logged or inferred from files: the disk may still say one ran
        return system.disk(incident, ctx, window, others)
    blocked = event["data"].get("blocked_s", event["data"].get("duration_s"))
    what = (f"blocked the training loop for {seconds(blocked)}"
            if isinstance(blocked, (int, float))
            else "began" if event["kind"] == "checkpoint_start" else "was saved")
    if incident.kind == "stall":
        return sourced(f"checkpoint at step {event['step']} {what}, inside the "
                       f"{seconds(incident.value)} gap before step {incident.step}.",
                       *of_event(event))
    where = lines_before(window, event["step"], incident)
    return sourced(f"checkpoint at step {event['step']} {what}, {where}.", *of_event(event))


def _save_in(incident, ctx, window) -> dict | None:
    """The save at the window's steps that says most (_best_save), or None."""
    lo, hi = int(window["step"].min()), int(window["step"].max())
    if incident.kind != "stall":
        hi = incident.step - 1  # a save at the incident's own step comes after its line
    hits = [e for e in ctx.events if e["kind"].startswith("checkpoint") and e["step"] is not None
            and lo <= e["step"] <= hi]
    return _best_save(hits, _during(window)) if hits else None


def _during(window):
    """A test of whether an event's ``time`` lies among the window's lines' (False where
    either is not known): after a resume the steps repeat, and each launch's save is its own
    launch's (events carry no attempt, lines and events both carry ``time``)."""
    times = window["time"].dropna() if "time" in window else ()
    if not len(times):
        return lambda event: False
    lo, hi = float(times.min()) - TIME_SLACK_S, float(times.max()) + TIME_SLACK_S
    return lambda event: event["time"] is not None and lo <= event["time"] <= hi


def _best_save(hits: list[dict], during) -> dict:
    """The save that says most: one written while the window's lines were (``during``), one
    the log wrote before one cliffwatch inferred (our own trainer's ckpt/step-N.pt repeats the
    checkpoint_end of its events.jsonl, which knows the blocked seconds), an end before a
    start, then the latest."""
    return max(enumerate(hits), key=lambda hit: (
        during(hit[1]), not hit[1]["data"].get("inferred", False),
        hit[1]["kind"] == "checkpoint_end", hit[0]))[1]


def _resume(incident, ctx, window, others) -> str | None:
    """The latest attempt that began in the window (its first line is there), with the signs
    of its restart and the resume event that opened it, if one did. An attempt that began
    with the run is a resume only when a resume event opened it (a log that starts with a
    launch loading a checkpoint)."""
    opening = _opening(window, ctx.attempts)
    if opening is None:
        return None
    i, number = opening
    attempt = ctx.attempts.get(number) or Attempt(
        int(window["step"].iat[i]), int(window["step"].iat[i - 1]) if i else None,
        "step_back" if i else "start")
    event = _opened_by(attempt, number, ctx, _resume_slack(window), i > 0)
    later = len(window) - 1 - i
    where = f"{later} line{'s' if later != 1 else ''} before step {incident.step}"
    signs = [s for s in attempt.reason.split("+") if s in SIGNS]
    if attempt.reason == "start" or attempt.prev_step is None:
        if event is None:
            return None  # the run's own start
        if "from_step" in event["data"]:
            return sourced(f"the run resumed from the checkpoint of step "
                           f"{event['data']['from_step']} (resume event), {where}.",
                           *of_event(event))
        return sourced(f"{_said(event)}, {where}.", *of_event(event))
    seen = " and ".join(SIGNS[s] for s in signs) or SIGNS["step_back"]
    said = f", and {_said(event)}" if event is not None else ""
    sentence = (f"attempt {number} resumed at step {attempt.start_step} after the previous "
                f"attempt reached step {attempt.prev_step} ({seen}{said}), {where}.")
    if event is not None:
        return sourced(sentence, *of_event(event))
    return sourced(sentence, not set(signs) & LOGGED_SIGNS,
                   f"attempts.reason {'+'.join(signs) or 'step_back'}")


def _opening(window: pd.DataFrame, attempts: dict[int, Attempt]) -> tuple[int, int] | None:
    """(position in the window, attempt) of the latest attempt whose first line is in the
    window: the line after another attempt's, or the window's first line when it is at its
    attempt's first step (the window may start where the attempt does)."""
    numbers = window["attempt"].to_numpy()
    steps = window["step"].to_numpy()
    for i in range(len(window) - 1, -1, -1):
        number = int(numbers[i])
        if i and numbers[i - 1] != number:
            return i, number
        if not i and number in attempts and attempts[number].start_step == int(steps[0]):
            return 0, number
    return None


def _opened_by(attempt: Attempt, number: int, ctx: RunContext, slack: int,
               after_previous: bool) -> dict | None:
    """The resume event that opened ``attempt`` (number ``number``): one whose checkpoint
    step lies at or
    up to ``slack`` steps below the attempt's first step (our trainer logs the checkpoint's
    step again, torchtitan the step after it, a trainer logging every N steps the next
    multiple of N). Several launches can resume from one checkpoint (a crash, a retry, a
    relaunch by hand): they are paired in the order the log has them, the k-th attempt to
    begin at a step taking the k-th such event. An event that names no checkpoint (a
    wrapper's "ATTEMPT #2 ... RESUME from <folder>" with no load after it) is at the last
    step logged before it: it opened the attempt after the one that ended there, when the
    window holds that end too (``after_previous``: live diagnosis reads the events at the
    window's steps only)."""
    start = attempt.start_step
    resumes = [e for e in ctx.events if e["kind"] == "resume" and e["step"] is not None]
    fits = [e for e in resumes if "from_step" in e["data"]
            and start - slack <= int(e["data"]["from_step"]) <= start]
    earlier = sum(1 for n, a in ctx.attempts.items() if n < number and a.start_step == start)
    if earlier < len(fits):
        return fits[earlier]
    after = [e for e in resumes if "from_step" not in e["data"] and after_previous
             and e["step"] == attempt.prev_step]
    return after[-1] if after else None


def _said(event: dict) -> str:
    """What a resume event says: the checkpoint's step when it names one, else only where it
    was logged (the step its own is, the last one logged before it)."""
    if "from_step" in event["data"]:
        return f"a resume event from the checkpoint of step {event['data']['from_step']}"
    return (f"a resume event at step {event['step']} (after the line of step "
            f"{event['step']}; it names no checkpoint step)")


def _resume_slack(window: pd.DataFrame) -> int:
    """Steps between a resume's checkpoint and the first step its attempt logs: at most one
    log interval, the window's smallest step forward (1 when it has none)."""
    diffs = np.diff(window["step"].to_numpy())
    forward = diffs[diffs > 0]
    return max(1, int(forward.min())) if len(forward) else 1


def _evaluation(incident, ctx, window, others) -> str | None:
    """An evaluation pass at the steps of a stall's gap (from the line before it to its own):
    one the log announced (eval_start / eval_end events, with its seconds), else an evaluation
    row (table evals). A row at the pass's step lends the sentence its values."""
    lo, hi = int(window["step"].min()), int(window["step"].max())
    rows = [r for r in ctx.evals if lo <= r["step"] <= hi]
    event = _eval_event(ctx, lo, hi)
    if event is not None:
        return _announced(incident, event, [r for r in rows if r["step"] == event["step"]])
    if not rows:
        return None
    row = rows[-1]
    routine = _took_no_pause(incident, ctx, lo, row["step"])
    if routine:
        return routine
    return sourced(f"an evaluation pass at step {row['step']}{_values(row)} ran inside the "
                   f"{seconds(incident.value)} gap before step {incident.step}.", False,
                   f"evaluation row{'s' if len(rows) != 1 else ''} at step "
                   f"{', '.join(str(r['step']) for r in rows)}")


def _took_no_pause(incident, ctx, lo: int, step: int) -> RuledOut | None:
    """Why the evaluation row at ``step`` is no cause of a stall: of the run's last
    EVAL_HISTORY evaluations below step ``lo`` (at least ROUTINE of them), fewer than half
    had a gap around them STALL_RATIO times the training's typical one. None when they paused
    (or too few are known to say): a routine evaluation every N steps that takes time."""
    gaps = ctx.eval_gaps(lo) if ctx.eval_gaps else []
    typical = incident.detail.get("typical_s", incident.baseline)
    if len(gaps) < ROUTINE or not typical:
        return None
    quick = [g for g in gaps if g <= STALL_RATIO * typical]
    if 2 * len(quick) <= len(gaps):
        return None
    many = f"{len(quick)} of the {len(gaps)}" if len(quick) < len(gaps) else f"the {len(gaps)}"
    # no "(inferred: ...)" of its own: the report would read it as the unknown cause's source
    return RuledOut(f"The evaluation row at step {step} is not its cause: {many} evaluations "
                    f"before it paused nothing (the log's lines around them at most "
                    f"{seconds(max(quick))} apart, against a typical {seconds(typical)}).")


def _eval_event(ctx, lo: int, hi: int) -> dict | None:
    """The evaluation the log announced from step lo to hi: the last one that ended there
    (its eval_end knows the seconds), else the last one that began there (a pass the log
    has not closed yet, or a crash inside it)."""
    hits = [e for e in ctx.events if e["kind"] in EVAL_EVENTS and e["step"] is not None
            and lo <= e["step"] <= hi]
    ends = [e for e in hits if e["kind"] == "eval_end"]
    return (ends or hits or [None])[-1]


def _eval_seconds(event: dict | None) -> float | None:
    seconds_ = (event or {}).get("data", {}).get("duration_s")
    return float(seconds_) if isinstance(seconds_, (int, float)) else None


def _announced(incident, event: dict, rows: list[dict]) -> str:
    took = _eval_seconds(event)
    what = (f"ran for {seconds(took)}" if took is not None
            else "ended" if event["kind"] == "eval_end" else "began")
    values = _values(rows[-1]) if rows else ""
    return sourced(f"an evaluation pass at step {event['step']}{values} {what}, inside the "
                   f"{seconds(incident.value)} gap before step {incident.step} "
                   f"({event['kind']} event).", *of_event(event))


def _values(row: dict) -> str:
    """" (val_loss 2.91)": an evaluation row's metrics, for the sentence."""
    values = ", ".join(f"{k} {v:.4g}" for k, v in row.items()
                       if k != "step" and isinstance(v, (int, float)))
    return f" ({values})" if values else ""


def _evaluation_first(incident, ctx, window) -> bool:
    """Whether an evaluation the log timed in this gap took longer than the save logged in
    it: then it, not the save, is the likelier cause (a save comes first otherwise, ORDER)."""
    lo, hi = int(window["step"].min()), int(window["step"].max())
    took = _eval_seconds(_eval_event(ctx, lo, hi))
    save = _save_in(incident, ctx, window)
    blocked = save and save["data"].get("blocked_s", save["data"].get("duration_s"))
    return took is not None and isinstance(blocked, (int, float)) and took > blocked


def _periodic(incident, ctx, window, others) -> str | None:
    """Three stalls in a row, this one among them, at even spacing in steps (the two intervals
    within PERIODIC_SPREAD of each other): what a save every N steps looks like. The three
    ending at this stall are looked at first, then those around it, then those after it, so
    the answer depends on the two stalls after it at most: live diagnosis judges the two
    stalls before each new one again (LiveRun.recurring)."""
    steps = sorted({s.step for s in others if s.kind == "stall"} | {incident.step})
    k = steps.index(incident.step)
    interval = max(int(incident.detail.get("steps", 1)), 1)  # the gap's steps: the log's pace
    for first in range(k - PERIODIC_MIN + 1, k + 1):
        trio = steps[first:first + PERIODIC_MIN] if first >= 0 else []
        gaps = np.diff(trio)
        if len(trio) == PERIODIC_MIN and gaps.min() >= PERIODIC_INTERVALS * interval and (
                gaps.max() - gaps.min() <= PERIODIC_SPREAD * gaps.max()):
            listed = ", ".join(f"{s:,}" for s in trio)
            return sourced(f"stalls recur every ~{_round(float(gaps.mean())):,} steps (at "
                           f"steps {listed}), like {_periodic_kind(incident, window, ctx)}.",
                           True, "the steps of the run's stalls")
    return None


def _periodic_kind(incident, window, ctx) -> str:
    """What a stall every N steps looks like: evaluations where one ran in this stall's gap
    (their rows say so), else checkpoint saves."""
    lo, hi = int(window["step"].min()), int(window["step"].max())
    evaluated = any(lo <= r["step"] <= hi for r in ctx.evals) or (
        _eval_event(ctx, lo, hi) is not None)
    return "periodic evaluations" if evaluated else "periodic checkpoint saves"


def _round(period: float) -> int:
    """2,000 for 1,998.5: a period to two significant digits."""
    digits = max(0, len(str(int(period))) - 2)
    return int(round(period, -digits))


def _stall(incident, ctx, window, others) -> str | None:
    ids = set(window["line_id"].tolist())
    hits = [s for s in others if s.kind == "stall" and s.line_id in ids]
    if not hits:
        return None
    stall = hits[-1]
    ratio = stall.value / stall.baseline if stall.baseline else math.inf
    later = int((window["line_id"] > stall.line_id).sum())
    steps = stall.detail["steps"]  # since the line before: 1 is the next step, none missed
    return sourced(f"{seconds(stall.value)} passed without a log line before step {stall.step} "
                   f"({ratio:.1f}x the typical {seconds(stall.baseline)}; {steps} "
                   f"step{'s' if steps != 1 else ''} since the line before), {later} line"
                   f"{'s' if later != 1 else ''} before step {incident.step}.", True,
                   "the gaps between the log's times")


def _learning_rate(incident, ctx, window, others) -> str | None:
    if "lr" not in window:
        return None
    sentence = schedule.explain(window, incident.step, ctx.lr_name)
    return sentence and sourced(sentence, True, f"the {ctx.lr_name} column's schedule")


def _grad_norm(incident, ctx, window, others) -> str | None:
    """A gradient norm's spike (a warning of its own) in the lines before a loss incident."""
    if is_grad_norm(incident.metric):
        return None
    ids = set(window["line_id"].tolist())
    hits = [s for s in others if s.kind == "spike" and is_grad_norm(s.metric)
            and s.line_id in ids and s.line_id <= incident.line_id]
    if not hits:
        return None
    spike = hits[-1]
    ratio = f", {spike.value / spike.baseline:.0f}x its {spike.baseline:.2g}" if (
        spike.baseline) else ""
    return sourced(f"{spike.metric} spiked to {spike.value:.3g} at step {spike.step}{ratio}, "
                   f"{lines_before(window, spike.step, incident)}.", True,
                   f"the {spike.metric} column")


def _buckets(incident, ctx, window, others) -> str | None:
    if not len(ctx.bucket_runs):
        return None
    positions = [ctx.index(i) for i in window["line_id"]]
    best = max(positions, key=lambda p: ctx.bucket_runs[p])
    length = int(ctx.bucket_runs[best])
    typical = ctx.typical_run
    if length < BUCKET_RUN_MIN or length < BUCKET_RUN_TIMES_TYPICAL * typical:
        return None
    return sourced(f"{length} consecutive micro-batches came from length bucket "
                   f"{int(ctx.run_bucket[best])} up to step {int(ctx.lines['step'].iat[best])} "
                   f"(99th percentile of same-bucket runs in this run: {typical:.0f}).", False,
                   "the buckets field")


def _epoch(incident, ctx, window, others) -> str | None:
    lo, hi = int(window["step"].min()), int(window["step"].max())
    for event in reversed(ctx.events):
        if event["kind"] == "epoch_start" and event["step"] is not None and (
                lo <= event["step"] <= hi):
            epoch = event["data"].get("epoch", "?")
            where = lines_before(window, event["step"], incident)
            return sourced(f"epoch {epoch} began at step {event['step']} (epoch_start event), "
                           f"{where}.", *of_event(event))
    epochs = window["epoch"].to_numpy(dtype=float)
    floors = np.floor(epochs)
    crossed = np.flatnonzero(np.isfinite(floors[1:]) & (floors[1:] > floors[:-1]))
    if len(crossed):
        i = crossed[-1] + 1
        step = int(window["step"].iat[i])
        return sourced(f"the epoch field reached {epochs[i]:g} at step {step}, "
                       f"{lines_before(window, step, incident)}.", True, "the epoch field")
    per = ctx.steps_per_epoch
    # a boundary b means the epoch after it starts at step b + 1: the line at b is the old one
    if per and (lo - 1) // per != (hi - 1) // per:
        boundary = ((hi - 1) // per) * per
        return sourced(f"step {boundary} is an epoch boundary ({per} steps per epoch in "
                       f"run.json), {lines_before(window, boundary, incident)}.", True,
                       "steps_per_epoch in run.json")
    return None


CHECKS = (("checkpoint", _checkpoint), ("resume", _resume), ("evaluation", _evaluation),
          ("swap", system.swap), ("input_wait", system.input_bound),
          ("gpu_memory", system.gpu_memory),
          ("periodic", _periodic), ("stall", _stall), ("bucket_homogeneity", _buckets),
          ("epoch_boundary", _epoch), ("learning_rate", _learning_rate),
          ("grad_norm", _grad_norm))
# most likely first, as CHECKS has them: the lr comes after the causes logged before it (an lr
# in warm-up is there for every early incident), so an incident those explain keeps its first
# cause
ORDER = [cause for cause, _ in CHECKS]
# the kinds of incident some causes are judged for (the others: every kind); the lr and a
# gradient norm's spike before explain a loss that rose, not a gap, a NaN or a drop
ONLY = {"evaluation": ("stall",), "periodic": ("stall",), "swap": ("stall",),
        "input_wait": ("stall",), "gpu_memory": ("stall",),
        "learning_rate": ("spike", "divergence"), "grad_norm": ("spike", "divergence")}
# causes a save explains away: the stall before an incident, and a core pegged or GPUs idle
# while the loop waited on the save (its pickling pegs a core too)
SAVED = ("stall", "input_wait")
