"""What the dashboard reads, through named queries and the read-only helper."""

from __future__ import annotations

import pandas as pd

from app.diagnose.detect import NOT_METRICS
from app.server.routes import named
from app.state import current


def logdir() -> str:
    return str(current().monitor.logdir)


def _frame(name: str, params: dict | None = None) -> pd.DataFrame:
    result = named(name, params)
    return pd.DataFrame.from_records(result.rows, columns=result.columns)


def runs() -> pd.DataFrame:
    return _frame("runs")


FULL_LINES = 20_000  # up to this many lines a chart gets every point; beyond, `downsample`


def columns(run: str) -> dict[str, int]:
    """How many lines of the run carry each column."""
    result = named("run_columns", {"run": run})
    return dict(zip(result.columns, result.rows[0], strict=True)) if result.rows else {}


def metric_names(counts: dict[str, int]) -> list[str]:
    return [c for c, n in counts.items() if c not in NOT_METRICS and n]


def metrics(run: str) -> pd.DataFrame:
    return _frame("run_metrics", {"run": run})


def series(run: str, metric: str, lines: int, full: pd.DataFrame | None) -> pd.DataFrame:
    """What one chart plots: every line of a small run; for a big one about 2,000 points
    that keep every spike (queries/downsample.sql)."""
    if lines <= FULL_LINES and full is not None:
        return full
    frame = _frame("downsample", {"run": run, "metric": metric, "points": 2000})
    return frame.rename(columns={"value": metric}).assign(attempt="all", elapsed_s=None)


def markers(run: str) -> pd.DataFrame:
    return _frame("run_markers", {"run": run})


def incidents(run: str) -> pd.DataFrame:
    frame = _frame("incidents", {"run": run})
    if frame.empty:
        return frame
    frame["causes"] = frame["causes"].map(", ".join)
    frame["evidence"] = frame["evidence"].map(" ".join)
    return frame[["kind", "metric", "step", "end_step", "value", "baseline", "causes",
                  "evidence"]]
