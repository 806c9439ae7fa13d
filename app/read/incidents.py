"""The Incidents page's table: what detection found, with a step range around each incident
to open the Run page zoomed on it (``/run?run=R&from=FROM_STEP&to=TO_STEP``)::

    run         kind   metric    step  end_step  value  baseline  causes       from_step  to_step
    seed-cliff  spike  loss      2029      2035  13.0     0.739  checkpoint        1989     2075

The range pads the incident by ``PAD_LINES`` logged lines either side, at the run's average
steps per line, or by half the incident's own span when that is wider.
"""

from __future__ import annotations

import pandas as pd

from . import frame

PAD_LINES = 20


def incidents_table(cursor, run: str | None = None,
                    kinds: list[str] | None = None) -> pd.DataFrame:
    """Incidents of ``run`` (None: every run) of ``kinds`` (None: every kind)."""
    return frame(cursor, "read/incidents",
                 {"run": run, "kinds": list(kinds) if kinds else None, "pad_lines": PAD_LINES})
