"""What the dashboard reads, through named queries and the read-only helper."""

from __future__ import annotations

import pandas as pd

from app.server.routes import named
from app.server.state import current

NOT_METRICS = {"run", "attempt", "step", "elapsed_s", "time", "epoch", "buckets", "file_id",
               "ingested_at"}


def logdir() -> str:
    return str(current().monitor.logdir)


def _frame(name: str, params: dict | None = None) -> pd.DataFrame:
    result = named(name, params)
    return pd.DataFrame.from_records(result.rows, columns=result.columns)


def runs() -> pd.DataFrame:
    return _frame("runs")


def metrics(run: str) -> pd.DataFrame:
    return _frame("run_metrics", {"run": run})


def metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c not in NOT_METRICS
            and pd.api.types.is_numeric_dtype(frame[c]) and frame[c].notna().any()]


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
