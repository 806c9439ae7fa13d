"""Chart builders are pure functions: a DataFrame in, a Vega-Lite spec out."""

from __future__ import annotations

import pandas as pd

from app.dashboard.charts import metric_line

FRAME = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [2.0, 1.5, 9.0, 1.2], "attempt": [1, 1, 2, 2],
                      "elapsed_s": [1.0, 2.0, 3.0, 4.0]})


def test_metric_line_plots_the_metric_per_attempt():
    spec = metric_line(FRAME, "loss").to_dict()
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["y"]["field"] == "loss"
    assert spec["encoding"]["color"]["field"] == "attempt"
    assert spec["title"] == "loss"


def test_markers_become_rules_with_their_labels():
    markers = pd.DataFrame({"step": [2, 3], "marker": ["checkpoint", "incident"],
                            "label": ["checkpoint, loop blocked 11.3 s", "spike in loss"]})
    spec = metric_line(FRAME, "loss", markers).to_dict()
    line, rules = spec["layer"]
    assert line["mark"]["type"] == "line"
    assert rules["mark"]["type"] == "rule" and rules["encoding"]["x"]["field"] == "step"
    data = spec["datasets"][rules["data"]["name"]]
    assert [d["label"] for d in data] == ["checkpoint, loop blocked 11.3 s", "spike in loss"]
