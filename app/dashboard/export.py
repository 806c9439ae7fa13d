"""PNG export of any chart for an incident write-up, with Altair's own converter (vl-convert:
no browser, no network).

    png(metric_chart(frame, "loss"))  ->  b"\\x89PNG\\r\\n..."
"""

from __future__ import annotations

import json

import altair as alt
import vl_convert

# The Vega-Lite library vl-convert runs must match the schema Altair writes ("v6.4.1" -> "6.4").
VL_VERSION = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
EXPORT_WIDTH = 900  # px of a continuous x axis; on the page the container sets the width


def png(chart: alt.TopLevelMixin | dict, *, scale: float = 2.0) -> bytes:
    """The chart (or the spec charts.vega_lite made of it, its datasets DataFrames) as PNG
    bytes, drawn as on the page (scale 2 for a sharp image in a report)."""
    if isinstance(chart, dict):
        spec = {**chart, "datasets": {name: json.loads(frame.to_json(orient="records"))
                                      for name, frame in chart.get("datasets", {}).items()}}
        spec["config"] = {**spec.get("config", {}),
                          "view": {"continuousWidth": EXPORT_WIDTH}}
    else:
        spec = chart.configure_view(continuousWidth=EXPORT_WIDTH).to_dict()
    # allowed_base_urls=[]: a chart's data is embedded; the converter never fetches anything.
    return vl_convert.vegalite_to_png(spec, vl_version=VL_VERSION, scale=scale,
                                      allowed_base_urls=[])
