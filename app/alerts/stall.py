"""The ``stall`` rule: no new line while the run is not finished, judged by a timer.

"Last line" is when the monitor last saw one of the run's log files grow, by its own clock
(``files.grew_at``; a file's first read, history found at start-up, counts at its mtime but
never later than then): stored in the database, so a stall that began before a server restart
fires on time after it, and a file server's skewed clock cannot move it (a log dated in the
future never stalled; one dated 2 h back was history that never stalled though it grew).
The budget is ``factor`` x the run's typical interval between lines (median of its last 64,
from the logs' own clock), never less than ``min``; while a ``checkpoint_start`` has no
``checkpoint_end`` (and no later step was logged) it is ``checkpoint_budget`` and the alert
names the checkpoint. A run whose last event is
``run_end`` (status no longer ``running``) never stalls.

A run already silent for an hour when the rules first met it (a finished or crashed run from
before cliffwatch watched) is history, not a stall, until it writes again; so is one already
silent past its budget then (``before_watch``): a stall is one cliffwatch saw begin.

The timers run on the live runs' facts (status, last write, last step) that changes.py keeps
in memory and refreshes for the runs ingest stored something for: the timers cost no query
(a budget's figures are read once a silence), and finished runs are not looked at, however
many the database holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..db import queries
from . import lifecycle
from .duration import format_duration
from .fields import Field, RuleType, at_least, duration_s, positive_duration_s
from .state import ACTIVE, PassWrites
from .webhook import number

if TYPE_CHECKING:  # rules.py builds Rule from the types declared here and in lines.py
    from .rules import Rule


@dataclass(frozen=True)
class Quiet:
    run: str
    status: str
    last_write: float | None
    last_step: int | None
    first_time: float | None
    history_step: int | None


@dataclass(frozen=True)
class Budget:
    seconds: float
    typical_s: float | None
    checkpoint: dict | None  # {"step", "time", "path"} of a save still open


class StallJudge:
    """Per-run facts a budget needs, read for all runs that need them in one query each and
    kept until the run writes again (a quiet run costs no query per tick)."""

    def __init__(self):
        self.known: dict[str, tuple[float | None, float | None, dict | None]] = {}

    def prepare(self, cursor, quiets: list[Quiet]) -> None:
        """Typical intervals and open checkpoints of the runs whose files changed since."""
        stale = [q for q in quiets if q.run not in self.known
                 or self.known[q.run][0] != q.last_write]
        if not stale:
            return
        runs = [q.run for q in stale]
        typical = dict(queries.execute(cursor, "alerts/engine_typical_intervals",
                                       {"runs": runs}).fetchall())
        saves = {row[0]: {"step": row[1], "started_time": row[2], "path": row[3]}
                 for row in queries.execute(cursor, "alerts/engine_open_checkpoints",
                                            {"runs": runs}).fetchall()}
        for q in stale:
            self.known[q.run] = (q.last_write, typical.get(q.run), saves.get(q.run))

    def budget(self, rule: Rule, quiet: Quiet) -> Budget:
        _, typical, checkpoint = self.known.get(quiet.run, (None, None, None))
        if checkpoint is not None:
            return Budget(rule.checkpoint_budget_s, typical, checkpoint)
        adaptive = rule.stall_factor * typical if typical else 0.0
        return Budget(max(rule.min_s, adaptive), typical, None)


def quiet_runs(live: dict, progress: dict, quiet_before: float, active: set[str]) -> list[Quiet]:
    """The runs still running whose files were last written before ``quiet_before``, plus
    those in ``active`` (a stall pending or firing, to resolve them), from the live runs'
    facts (changes.Facts by run) and the rules' progress by run: no query, however many runs
    the database holds."""
    quiets = []
    for run in sorted(live):
        facts = live[run]
        if facts.last_write is None:
            continue
        if run in active or (facts.status == "running" and facts.last_write < quiet_before):
            known = progress.get(run) or {}
            quiets.append(Quiet(run, facts.status, facts.last_write, facts.last_step,
                                known.get("first_time"), known.get("history_step")))
    return quiets


def eligible(quiet: Quiet) -> bool:
    """Still running, met by the rules, and not history (or written to since it was met)."""
    if quiet.status != "running" or quiet.last_write is None or quiet.first_time is None:
        return False
    return quiet.history_step is None or quiet.last_write > quiet.first_time


def before_watch(quiet: Quiet, budget: Budget) -> bool:
    """Whether a run past its budget stopped before cliffwatch watched it, rather than stalled
    while watched: not written since the rules first met it, and history then (a log that
    appeared whole: new_lines.history) or already silent past its budget then (a finished run
    copied with its mtime, a TensorBoard file from last week). A stall is one cliffwatch saw
    begin; such a run is "finished or stopped before cliffwatch started" (issue 20, item 4)
    until it writes again."""
    if quiet.first_time is None or quiet.last_write is None \
            or quiet.last_write > quiet.first_time:
        return False
    return quiet.history_step is not None or \
        quiet.last_write + budget.seconds < quiet.first_time


def judge(batch: PassWrites, rule: Rule, quiet: Quiet, budget: Budget | None, silences) -> None:
    """``budget`` is None for a run that cannot stall (not eligible)."""
    key = (rule.name, quiet.run, "")
    now = batch.now
    holds = budget is not None and now - quiet.last_write > budget.seconds
    st = batch.peek(key)
    if not holds:
        if st is not None and st.state in ACTIVE:
            st = batch.get(key)
            came_back = (quiet.last_write or 0) - st.detail.get("last_write", 0)
            lifecycle.clear(batch, rule, st, resolved_facts(quiet, st, came_back), silences)
        return
    if st is not None and (st.state == "firing" or (
            st.state == "pending" and now - st.pending_time < rule.for_s)):
        return  # nothing changes: no copy, no write
    st = batch.get(key)
    if st.state not in ACTIVE:
        lifecycle.begin(batch, st, step=quiet.last_step, value=now - quiet.last_write,
                        since=quiet.last_write + budget.seconds)
        st.detail["last_write"] = quiet.last_write
    if st.state == "pending" and now - st.pending_time >= rule.for_s:
        lifecycle.fire(batch, rule, st, firing_facts(rule, quiet, budget, now), silences)


def firing_facts(rule: Rule, quiet: Quiet, budget: Budget, now: float) -> dict:
    silent = now - quiet.last_write
    point = budget.checkpoint
    # the figures of the message's fields (webhook.number): "88.23 s" in both, never 88 next
    # to 88.23
    silence, allowed = number(silent, "s"), number(budget.seconds, "s")
    if silent >= 3600:  # 11105 s is a figure; a person woken by it reads hours
        silence += f", about {format_duration(60 * round(silent / 60))}"
    if point is not None:
        summary = (f"checkpoint at step {point['step']} has not ended: no new line for "
                   f"{silence} (checkpoint budget {allowed})")
    elif budget.typical_s:
        summary = (f"no new line for {silence} (budget {allowed}: {rule.stall_factor:g}x the "
                   f"typical gap between lines {number(budget.typical_s, 's')}, at least "
                   f"{number(rule.min_s, 's')})")
    else:
        summary = f"no new line for {silence} (budget {allowed})"
    return {"step": quiet.last_step, "value": silent, "typical": budget.typical_s,
            "summary": summary, "checkpoint": point, "budget_s": budget.seconds,
            "last_line_time": quiet.last_write}


def resolved_facts(quiet: Quiet, st, came_back: float) -> dict:
    if quiet.status != "running":
        summary = f"run ended ({quiet.status})"
    else:
        summary = (f"lines came back after {number(came_back, 's')} of silence (step "
                   f"{quiet.last_step})")
    return {"step": quiet.last_step, "value": came_back, "summary": summary,
            "checkpoint": (st.detail.get("facts") or {}).get("checkpoint")}


def _stall_text(rule: Rule, held: str) -> str:
    return (f"no new line for {rule.stall_factor:g}× the run's typical interval (at least "
            f"{format_duration(rule.min_s)}; {format_duration(rule.checkpoint_budget_s)} "
            f"while a checkpoint is being saved)")


RULE_TYPE = RuleType("stall", "stall", (
    # the budget: factor x the run's typical interval, never less than min
    Field("factor", "stall_factor", at_least(1, "times the run's typical interval"),
          "factor = 10", default=10.0),
    Field("min", "min_s", duration_s, 'min = "60s"', default=60.0),
    Field("checkpoint_budget", "checkpoint_budget_s", positive_duration_s,
          'checkpoint_budget = "10m"', default=600.0),
), _stall_text)
