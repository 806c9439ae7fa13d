"""Chart builders: pure functions from a DataFrame to an ``alt.Chart``, testable without
Streamlit."""

from __future__ import annotations

import altair as alt
import pandas as pd


def metric_line(frame: pd.DataFrame, metric: str) -> alt.Chart:
    """One metric against step, one line per attempt, with tooltips."""
    return (
        alt.Chart(frame, height=260)
        .mark_line(point=False)
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y(f"{metric}:Q", title=metric, scale=alt.Scale(zero=False)),
            color=alt.Color("attempt:N", legend=alt.Legend(title="attempt")),
            tooltip=["step:Q", f"{metric}:Q", "attempt:N", "elapsed_s:Q"],
        )
        .properties(title=metric)
    )
