"""Chart builders: pure functions from DataFrames to ``alt.Chart``, testable without
Streamlit."""

from __future__ import annotations

import altair as alt
import pandas as pd

MARKER_COLORS = alt.Scale(domain=["checkpoint", "epoch", "resume", "incident"],
                          range=["#7f7f7f", "#1f77b4", "#9467bd", "#d62728"])


def metric_line(frame: pd.DataFrame, metric: str,
                markers: pd.DataFrame | None = None) -> alt.LayerChart | alt.Chart:
    """One metric against step, one line per attempt, with vertical rules for checkpoints,
    epoch starts, resumes and incidents (hover for what they are)."""
    line = (
        alt.Chart(frame, height=260)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y(f"{metric}:Q", title=metric, scale=alt.Scale(zero=False)),
            color=alt.Color("attempt:N", legend=alt.Legend(title="attempt")),
            tooltip=["step:Q", f"{metric}:Q", "attempt:N", "elapsed_s:Q"],
        )
    )
    if markers is None or markers.empty:
        return line.properties(title=metric)
    rules = (
        alt.Chart(markers)
        .mark_rule(strokeDash=[4, 3], opacity=0.7)
        .encode(x="step:Q", stroke=alt.Stroke("marker:N", scale=MARKER_COLORS,
                                               legend=alt.Legend(title="marker")),
                tooltip=["step:Q", "marker:N", "label:N"])
    )
    return alt.layer(line, rules).resolve_scale(color="independent").properties(title=metric)
