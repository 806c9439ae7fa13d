"""Chart builders are pure functions: a DataFrame in, a Vega-Lite spec out."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from app.dashboard.charts import metric_line

FRAME = pd.DataFrame({"step": [1, 2, 3, 4], "loss": [2.0, 1.5, 9.0, 1.2], "attempt": [1, 1, 2, 2],
                      "elapsed_s": [1.0, 2.0, 3.0, 4.0]})


def test_metric_line_plots_the_metric_per_attempt():
    spec = metric_line(FRAME, "loss").to_dict()
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["y"]["field"] == "value"
    assert spec["encoding"]["y"]["title"] == "loss"
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


@pytest.mark.parametrize("name", ["acc.top1", "eval:loss", "loss[0]", "a\\b", "x:Q"])
def test_metric_names_with_field_syntax_are_plotted_as_they_are(name):
    """Vega-Lite reads "." and "[]" in a field as nesting and Altair reads ":" as a type:
    such a metric must still be drawn from its own values, under its own name."""
    frame = FRAME.rename(columns={"loss": name})
    spec = metric_line(frame, name).to_dict()
    y = spec["encoding"]["y"]
    assert y["title"] == name and y["type"] == "quantitative"
    values = [vega_get(row, y["field"]) for row in spec["datasets"][spec["data"]["name"]]]
    assert values == [2.0, 1.5, 9.0, 1.2]
    assert spec["encoding"]["tooltip"][1]["title"] == name


def vega_get(row: dict, field: str):
    """A field looked up as Vega-Lite does: unescaped "." and "[...]" step into nested data."""
    path = re.findall(r"(?:\\.|[^.\[\]\\])+", field)
    value = row
    for part in path:
        value = value[re.sub(r"\\(.)", r"\1", part)]
    return value
