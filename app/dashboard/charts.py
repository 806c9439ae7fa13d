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
    # The metric is plotted as the column "value": a metric's name is the user's text, and
    # Vega-Lite reads "." in a field as nesting and Altair ":" as a type ("acc.top1",
    # "eval:loss"). Only the columns drawn are embedded in the page.
    plotted = frame[["step", metric, "attempt", "elapsed_s"]].rename(columns={metric: "value"})
    line = (
        alt.Chart(plotted, height=260)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("value:Q", title=metric, scale=alt.Scale(zero=False)),
            color=alt.Color("attempt:N", legend=alt.Legend(title="attempt")),
            tooltip=["step:Q", alt.Tooltip("value:Q", title=metric), "attempt:N",
                     "elapsed_s:Q"],
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
