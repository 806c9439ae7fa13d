"""Attempts: the one rule that numbers them, used by both parse paths.

A run is resumed from a checkpoint by starting again at an earlier step, so a line whose
step falls back into steps already logged starts a new attempt (``writers.py`` says which
lines do: not a line logged twice, a few steps out of order, or the second of two processes
printing one log; an ``epoch`` that resets to about 0 does, whatever the step). The first
line a file ever stores starts one too (``start``, or the reason the file was read again from
its start). Steps 1, 2, 3, 2, 3 in a new file are two attempts::

    attempt  1  1  1  2  2
    starts   {attempt 1, start_step 1, prev_step None, reason "start"}
             {attempt 2, start_step 2, prev_step 3, reason "step_back"}

Each sign seen at a resume is in its reason, joined by ``+`` (``step_back+clock_back``).
The careful path numbers every row (``number``); the fast path stores a chunk whose steps
rise from the file's last one, so only a file's first line can start an attempt there, and
it asks ``first`` about that one step (``takes`` says whether it may store the chunk).
"""

from __future__ import annotations

from ..lazy import LazyModule
from . import writers
from .filestate import FileState

np = LazyModule("numpy")  # the fast path asks about one step: no numpy for it


def number(steps: np.ndarray, state: FileState, reset_reason: str | None,
           clocks: np.ndarray | None = None,
           epochs: np.ndarray | None = None) -> tuple[np.ndarray, list[dict]]:
    """The attempt of each step, and the attempts that start among them. Moves ``state``
    (the file's state being built for this batch) past the steps. ``clocks``: each line's
    seconds (elapsed_s, else time) and ``epochs`` its epoch, NaN where not logged."""
    n = len(steps)
    clocks = np.full(n, np.nan) if clocks is None else clocks
    epochs = np.full(n, np.nan) if epochs is None else epochs
    memory = writers.load(state.writers, state.last_step)
    found = writers.resumes(memory, steps, clocks, epochs)
    if state.last_step is None:
        found.insert(0, (0, reset_reason or "start"))
    marks = np.zeros(n, dtype=np.int64)
    marks[[i for i, _ in found]] = 1
    attempts = state.attempt + np.cumsum(marks)
    starts = [{"attempt": int(attempts[i]), "start_step": int(steps[i]),
               "prev_step": int(steps[i - 1]) if i else state.last_step, "reason": reason}
              for i, reason in found]
    state.writers = memory.dump()
    if n:
        state.attempt, state.last_step = int(attempts[-1]), int(steps[-1])
    return attempts, starts


def takes(step: int, state: FileState) -> bool:
    """Whether a clean chunk (its steps rising) that starts at ``step`` starts no attempt
    ``number`` would see otherwise: the file's first, or one rising from its last step while
    one process writes it."""
    if state.last_step is None:
        return True
    return step > state.last_step and writers.load(state.writers, state.last_step).other is None


def first(step: int, state: FileState, reset_reason: str | None) -> list[dict]:
    """``number`` for a batch whose steps rise after its first (the fast path's): the attempt
    its first step starts, if it starts one. Moves ``state`` past that step."""
    if state.last_step is not None and step > state.last_step:
        state.last_step = step
        return []
    start = _first(state, reset_reason, step, state.attempt + 1)
    state.attempt, state.last_step = state.attempt + 1, step
    return [start]


def late(steps: np.ndarray, old: FileState, new: FileState) -> tuple[np.ndarray, list[dict]]:
    """Attempts of lines a rotated file got after the switch to the new file: while their
    steps rise from the old file's last one they belong to its attempt (so the new file's
    attempt, if it began later, still cuts them off correctly); a step back starts an attempt
    numbered after every one the file has (``new.attempt``). Moves ``old`` past the rows."""
    prev = np.empty_like(steps)
    prev[1:] = steps[:-1]
    prev[0] = old.last_step if old.last_step is not None else 0
    starts_mask = steps <= prev
    starts_mask[0] |= old.last_step is None
    later = np.cumsum(starts_mask, dtype=np.int64)
    attempts = np.where(later == 0, old.attempt, new.attempt + later)
    starts = [{"attempt": int(attempts[i]), "start_step": int(steps[i]),
               "prev_step": int(prev[i]) if i or old.last_step is not None else None,
               "reason": "step_back"} for i in np.flatnonzero(starts_mask)]
    new.attempt += int(later[-1])
    old.attempt, old.last_step = int(attempts[-1]), int(steps[-1])
    return attempts, starts


def _first(state: FileState, reset_reason: str | None, first_step: int, attempt: int) -> dict:
    """The attempt that begins at a batch's first row; ``state`` holds the file's position
    before that row."""
    reason = "step_back" if state.last_step is not None else (reset_reason or "start")
    return {"attempt": attempt, "start_step": first_step, "prev_step": state.last_step,
            "reason": reason}
