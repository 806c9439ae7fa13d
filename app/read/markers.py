"""What the Run page marks on every chart, in the x unit of the charts::

    kind        detail  x0       x1       step  end_step  label
    checkpoint          10005.0  10160.2  2000  2000      checkpoint ckpt/step-2000 at step
                                                          2000: saved in 155.2 s, the training
                                                          loop was blocked 155.2 s
    epoch               10601.2  10601.2  2114  2114      epoch 1 begins at step 2114
    incident    spike   10171.2  10211.2  2027  2035      spike in loss at step 2027: peak 13
                                                          at step 2029 (typical 0.7427) ...
    alert  stall: firing ...

Checkpoints span checkpoint_start..checkpoint_end (an open one ends at the run's newest
line), epochs and resumes are rules (x0 == x1), incidents span step..end_step (the label
names the worst value and its step, which need not be the first), alert
firings are rules at the step that fired. ``lo``/``hi`` (steps, inclusive) keep the markers
that overlap the range (queries/read/markers.sql).

Cost is bounded whatever the run's length (the Run page reads this on every refresh):
one round trip for the markers (queries/read/markers.sql: the small tables, and the run's
newest line, where an unfinished checkpoint ends, found as the Runs table finds it
(app/read/runs.py ``file_end``): from each file's tile watermark on, through a dynamic
rowid filter). Markers with no elapsed_s or time of their own (incidents, alert firings,
resumes) are placed at the run's logged line at their step, looked up by the list of those
steps pushed into the scan (row groups holding none are skipped); only a step with no
logged line of its own is looked up alone, in a step window (``WINDOWS``) before it.
"""

from __future__ import annotations

import pandas as pd

from ..db import queries
from ..errors import CliffwatchError
from . import frame

UNITS = ("step", "elapsed", "time")
COLUMNS = {"elapsed": "elapsed_s", "time": "time"}
WINDOWS = (4096, 1 << 20, None)  # steps looked back for a line before a marker; None: any


def markers(cursor, run: str, *, lo: int | None = None, hi: int | None = None,
            x: str = "step") -> pd.DataFrame:
    if x not in UNITS:
        raise CliffwatchError(f"x must be one of {', '.join(UNITS)}, got {x!r}")
    found = frame(cursor, "read/markers", {"run": run, "lo": lo, "hi": hi})
    if x == "step":
        x0, x1 = found["step"], found["end_step"]
    else:
        own0, own1 = found["e0" if x == "elapsed" else "t0"], found["e1" if x == "elapsed"
                                                                     else "t1"]
        wanted = {*found["step"][own0.isna()], *found["end_step"][own1.isna()]}
        files = [int(f) for f in found["files"].iat[0]] if len(found) else []
        at = positions(cursor, run, files, wanted, COLUMNS[x])
        x0 = own0.fillna(found["step"].map(at))
        x1 = own1.fillna(found["end_step"].map(at))
    out = found.assign(x0=pd.to_numeric(x0, errors="coerce").astype("float64"),
                       x1=pd.to_numeric(x1, errors="coerce").astype("float64"))
    out = out.sort_values(["step", "kind", "x0"], kind="stable", ignore_index=True)
    return out[["kind", "detail", "x0", "x1", "step", "end_step", "label"]]


def positions(cursor, run: str, files: list[int], steps: set, column: str) -> dict:
    """``column`` (elapsed_s or time) of the run's logged line at or before each step (its
    current timeline), by step: one scan for the steps that have a line, then a windowed
    look-up for each one that has none."""
    steps = sorted(int(s) for s in steps if pd.notna(s))
    if not steps or not files:
        return {}
    exact = frame(cursor, "read/markers_place", {"files": files, "run": run, "steps": steps})
    at = dict(zip(exact["step"], exact[column], strict=True))
    for step in (s for s in steps if s not in at):
        for window in WINDOWS:
            row = queries.execute(cursor, "read/markers_before", {
                "files": files, "run": run, "step": step, "window": window}).fetchall()
            if row:
                at[step] = row[0][1 if column == "elapsed_s" else 2]
                break
    return at
