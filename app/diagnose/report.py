"""How incidents read: a short report for people, a list of objects for programs.

    seed-cliff: CLIFF in accuracy at step 4231 (through 4499): bottom 0.0002 at step 4377, down
      from 0.1608 (-100%).
      Likely causes: bucket_homogeneity, epoch_boundary.
      - bucket_homogeneity: 17 consecutive micro-batches came from length bucket 5 ...

Each incident has a severity (detect.severity_of): a gradient norm's spike is a "warning", said
so in its headline; the JSON gives it as ``severity``.
"""

from __future__ import annotations

import math

from ..db.readonly import jsonable
from .causes import seconds
from .detect import Incident, severity_of
from .diagnosis import severity

KEYS = ("run", "kind", "metric", "step", "end_step", "worst_step", "value", "baseline", "causes",
        "evidence")


def as_dict(incident: Incident) -> dict:
    return {**{k: jsonable(getattr(incident, k)) for k in KEYS}, "severity": incident.severity}


def text(incidents: list[dict], scope: str) -> str:
    if not incidents:
        return (f"No incidents in {scope}: no stalls, spikes, divergences, cliffs, non-finite "
                "values or stragglers.\n")
    ordered = sorted(incidents, key=severity)
    lines = [f"{len(ordered)} incident{'s' if len(ordered) != 1 else ''} in {scope}, most "
             "severe first.", ""]
    for number, incident in enumerate(ordered, start=1):
        lines.append(f"{number}. {incident['run']}: {_headline(incident)}")
        lines.append(f"   Likely cause{'s' if len(incident['causes']) > 1 else ''}: "
                     f"{', '.join(incident['causes'])}.")
        for cause, sentence in zip(incident["causes"], incident["evidence"], strict=True):
            lines.append(f"   - {cause}: {sentence}")
        lines.append("")
    return "\n".join(lines)


def _headline(i: dict) -> str:
    where = f"at step {i['step']}" + (f" (through {i['end_step']})"
                                      if i["end_step"] != i["step"] else "")
    value, base = _num(i["value"]), _num(i["baseline"])
    if i["kind"] == "stall":
        return (f"STALL {where}: {seconds(value)} without a log line, {value / base:.1f}x the "
                f"typical {seconds(base)}.")
    if i["kind"] == "straggler":
        return (f"STRAGGLER {i['metric']} {where}: {seconds(value)} per step, "
                f"{value / base:.1f}x the other ranks' {seconds(base)}.")
    if i["kind"] == "nonfinite":
        last = "none" if i["baseline"] is None else f"{_num(i['baseline']):.4g}"
        return f"NON-FINITE {i['metric']} {where}: {i['value']} (last finite value {last})."
    if i["kind"] == "divergence":
        at = "" if i.get("worst_step") in (None, i["step"]) else f" at step {i['worst_step']}"
        return (f"DIVERGENCE in {i['metric']} {where}: peak {value:.4g}{at}, {value / base:.1f}x "
                f"its best value before ({base:.4g}), and it stayed up.")
    change = (value - base) / abs(base) * 100 if base else math.inf
    verb, worst = ("up", "peak") if i["kind"] == "spike" else ("down", "bottom")
    at = "" if i.get("worst_step") in (None, i["step"]) else f" at step {i['worst_step']}"
    warning = (" Warning: a gradient norm's spike, the loss is judged on its own."
               if severity_of(i["kind"], i["metric"]) == "warning" else "")
    return (f"{i['kind'].upper()} in {i['metric']} {where}: {worst} {value:.4g}{at}, {verb} "
            f"from {base:.4g} ({change:+.0f}%).{warning}")


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
