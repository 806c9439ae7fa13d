"""Writers: which process printed each line of a log, told from its steps and clocks.

Two processes may print one log (two ranks both printing, a relaunch while the old process
still runs): every step twice, a second or so apart, each copy with its own clock. A line
goes on the writer it continues (its step above that writer's last, its clock not behind),
so its interval is read on its own writer's clock, and a repeated step starts no attempt::

    step    100    100    101    101    102    102     ...   892    892
    clock   50.0   91.3   51.0   92.4   52.1   93.2    ...   0.4    1.9
    line    new    late   next*  next*  next*  next*         back   late
                                                   (* the other writer: two writers)

A line that continues no writer is ``late`` (a line logged twice, or a few steps out of order,
as at an epoch boundary: it starts a writer of its own, and the run goes on) or ``back``, a
resume: its step fell more than FEW steps below the last one and into steps already logged, or
fell at all while its clock began again (below half the last line's: our own trainer's
elapsed_s restarts at 0 in a resumed attempt, a few steps back or not). The signs seen at a
resume make its reason: ``step_back``, ``clock_back`` (the clock went back), ``epoch_reset``
(the ``epoch`` field fell to about 0, which alone is a resume too: a Hugging Face run restarted
with its step kept). A clock going back while the step rises is no resume (modded-nanogpt
restarts its timer after warm-up).

The same ``Writers`` state is kept by the ingest (``attempts.py``, between reads in
``files.writers``) and by the stall detector (``diagnose/detect.py``), so both read one log
the same way.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

FEW = 3  # steps: a line this far below the one before is late or repeated, not a resume
KEEP = 8  # lines: a writer silent this long has stopped (the old process of a restart)
TWO = 4  # lines in a row, each on the other writer than the line before: two writers
SMALL = 16  # lines: fewer are placed one by one (intervals)
NAN = float("nan")


@dataclass
class Track:
    step: int
    clock: float = NAN
    pace: float = NAN  # the clock's last rise on this writer: where its next line should be


@dataclass
class Writers:
    cur: Track | None = None  # the writer of the last line
    other: Track | None = None  # another one still writing, if any
    before: int | None = None  # the current writer's step before its last line
    idle: int = 0  # lines since ``other`` wrote
    streak: int = 0  # lines in a row that switched writer
    two_at: int | None = None  # the step where two writers were first seen, if ever
    epoch: float = NAN  # the last line's epoch

    def line(self, step: int, clock: float = NAN, epoch: float = NAN) -> tuple[str | None,
                                                                               float]:
        """Place one line; returns (the reason of the resume it is, or None; its interval on
        its writer's clock, NaN when it has none)."""
        reset = epoch < 1.0 and epoch < self.epoch / 2  # NaN compares false: no sign
        if not math.isnan(epoch):
            self.epoch = epoch
        cur = self.cur
        if cur is None:
            self.cur = Track(step, clock)
            return None, NAN
        track = self._continued(step, clock)
        if track is not None:
            dt = self._next(track, step, clock)
            return ("epoch_reset" if reset else None), dt
        restarted = step < cur.step and clock < cur.clock / 2  # its clock began again
        late = (cur.step - step <= FEW or (self.before is not None and step > self.before)
                ) and not restarted
        reason = None
        if not late or reset:
            signs = [] if late else ["step_back"]
            signs += ["clock_back"] * (clock < cur.clock) + ["epoch_reset"] * reset
            reason = "+".join(signs)
        self.other, self.cur, self.before = cur, Track(step, clock), None
        self.idle, self.streak = 1, 0
        return reason, NAN

    def _continued(self, step: int, clock: float) -> Track | None:
        """The writer this line continues: the nearest step below it, its clock not behind;
        at equal steps the writer whose pace predicts the clock best, else the other one (two
        writers alternate)."""
        found = [t for t in (self.cur, self.other)
                 if t is not None and t.step < step and not clock < t.clock]
        if len(found) < 2 or found[0].step != found[1].step:
            return max(found, key=lambda t: t.step, default=None)
        misses = [abs(clock - t.clock - t.pace) for t in found]
        if not any(math.isnan(m) for m in misses) and misses[0] != misses[1]:
            return found[misses.index(min(misses))]
        return found[1]

    def _next(self, track: Track, step: int, clock: float) -> float:
        dt = clock - track.clock
        if track is self.other:
            self.cur, self.other, self.idle = track, self.cur, 1
            self.streak += 1
            if self.streak >= TWO and self.two_at is None:
                self.two_at = step
        else:
            self.idle, self.streak = self.idle + 1, 0
            if self.idle > KEEP:
                self.other = None
        self.before = track.step
        track.step, track.clock = step, clock
        if not math.isnan(dt):
            track.pace = dt
        return dt

    def dump(self) -> str:
        """The state as stored in ``files.writers`` (JSON: NaN as null)."""
        return json.dumps(_nulls(asdict(self)))


def intervals(memory: Writers, steps, clocks) -> tuple[list[float] | None, int | None]:
    """Each line's interval on its own writer's clock (``memory`` moved past the lines), and
    the index of the line where two writers were first seen, if it is among them. Stretches
    whose steps rise and clocks do not fall, while one process writes, are done at once."""
    import numpy as np

    if len(steps) <= SMALL:  # a live tick's few lines: numpy's calls cost more than a loop
        return _one_by_one(memory, steps.tolist(), clocks.tolist())
    steps, clocks = np.asarray(steps), np.asarray(clocks, dtype=float)
    n, seen, at = len(steps), memory.two_at is not None, None
    dt = np.full(n, np.nan)
    odd = np.flatnonzero((np.diff(steps) <= 0) | _falls(clocks)) + 1
    i = 0
    for stop in [*odd.tolist(), n]:
        while i < min(stop + 1, n):  # the stretch to the odd line, then that line
            if i < stop and _plain(memory, steps[i], clocks[i]):
                dt[i:stop] = _rises(clocks[i:stop], memory.cur.clock)
                _advance(memory, steps, dt, i, stop, clocks)
                i = stop
                continue
            dt[i] = memory.line(int(steps[i]), float(clocks[i]))[1]
            if not seen and memory.two_at is not None:
                seen, at = True, i
            i += 1
    return dt, at


def resumes(memory: Writers, steps, clocks, epochs) -> list[tuple[int, str]]:
    """The lines that are resumes, by index, with their reasons (``memory`` moved past the
    lines): ``Writers.line`` on each, but stretches whose steps rise and clocks do not fall,
    while one process writes and no epoch resets, are done at once (as in ``intervals``)."""
    import numpy as np

    if len(steps) <= SMALL:
        found = (memory.line(int(s), float(c), float(e))[0]
                 for s, c, e in zip(steps, clocks, epochs, strict=True))
        return [(i, reason) for i, reason in enumerate(found) if reason]
    steps, clocks = np.asarray(steps), np.asarray(clocks, dtype=float)
    epochs = np.asarray(epochs, dtype=float)
    n, out, dt = len(steps), [], np.full(len(steps), np.nan)
    logged = np.maximum.accumulate(np.where(np.isnan(epochs), -1, np.arange(n)))
    before = np.full(n, memory.epoch)  # the epoch last logged before each line
    before[1:] = np.where(logged[:-1] >= 0, epochs[np.maximum(logged[:-1], 0)], memory.epoch)
    reset = (epochs < 1.0) & (epochs < before / 2)
    odd = np.flatnonzero((np.diff(steps) <= 0) | _falls(clocks) | reset[1:]) + 1
    i = 0
    for stop in [*odd.tolist(), n]:
        while i < min(stop + 1, n):  # the stretch to the odd line, then that line
            if i < stop and not reset[i] and _plain(memory, steps[i], clocks[i]):
                dt[i:stop] = _rises(clocks[i:stop], memory.cur.clock)
                _advance(memory, steps, dt, i, stop, clocks)
                if logged[stop - 1] >= i:
                    memory.epoch = float(epochs[logged[stop - 1]])
                i = stop
                continue
            reason = memory.line(int(steps[i]), float(clocks[i]), float(epochs[i]))[0]
            if reason:
                out.append((i, reason))
            i += 1
    return out


def _falls(clocks):
    """Whether each clock after the first is below the one before: compared, not subtracted
    (an infinite clock twice has no difference, and numpy warns on inf - inf)."""
    return clocks[1:] < clocks[:-1]


def _rises(clocks, before: float):
    """Each clock's rise over the one before it (``before``: the clock before the first),
    NaN where both are the same infinity: inf - inf has no value, as with a NaN clock."""
    import numpy as np

    prev = np.concatenate(([before], clocks[:-1]))
    same = np.isinf(clocks) & (clocks == prev)
    return np.subtract(clocks, prev, out=np.full(len(clocks), np.nan), where=~same)


def _one_by_one(memory: Writers, steps: list, clocks: list) -> tuple[list[float], int | None]:
    seen, at, found = memory.two_at is not None, None, []
    for i, (step, clock) in enumerate(zip(steps, clocks, strict=True)):
        found.append(memory.line(int(step), float(clock))[1])
        if not seen and memory.two_at is not None:
            seen, at = True, i
    return found, at


def _plain(memory: Writers, step, clock) -> bool:
    cur = memory.cur
    return (cur is not None and memory.other is None and step > cur.step
            and not clock < cur.clock)


def _advance(memory: Writers, steps, dt, i: int, stop: int, clocks) -> None:
    """``memory`` moved past lines i..stop-1, which all continue its one writer."""
    cur = memory.cur
    memory.before = int(steps[stop - 2]) if stop - i > 1 else cur.step
    memory.idle, memory.streak = memory.idle + stop - i, 0
    last = dt[i:stop]
    finite = last[last == last]
    memory.cur = Track(int(steps[stop - 1]), float(clocks[stop - 1]),
                       float(finite[-1]) if len(finite) else cur.pace)


def load(text: str | None, last_step: int | None) -> Writers:
    """The state stored for a file whose last stored step is ``last_step``: a state left
    behind by a read that did not keep it (the fast path's clean chunk) knows that step only."""
    if text:
        raw = json.loads(text)
        cur = raw.get("cur")
        if cur is not None and cur["step"] == last_step:
            tracks = {k: Track(**_nans(raw[k])) if raw[k] else None for k in ("cur", "other")}
            rest = {k: v for k, v in raw.items() if k not in tracks}
            rest["epoch"] = NAN if rest.get("epoch") is None else rest["epoch"]
            return Writers(**tracks, **rest)
    return Writers(cur=None if last_step is None else Track(last_step))


def _nulls(value):
    if isinstance(value, dict):
        return {k: _nulls(v) for k, v in value.items()}
    return None if isinstance(value, float) and math.isnan(value) else value


def _nans(track: dict) -> dict:
    return {k: NAN if v is None else v for k, v in track.items()}
