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
from .coverage import Look, Unread
from .detect import Incident, severity_of
from .diagnosis import severity
from .evidence import split
from .rules import KEYS

UNREAD_EXIT = 3  # diagnose's exit status when a log of a run it reports on was not read
MISSED_EXIT = (f"Exit status {UNREAD_EXIT}: a log of a run reported on was not read; fix or "
               "remove the file, or diagnose the run's other logs alone.\n")
NOTHING = ("no stalls, spikes, divergences, cliffs, non-finite values, frozen losses, crashes "
           "or stragglers")  # what "No incidents" means, said of a scope or of clean runs


def as_dict(incident: Incident) -> dict:
    return {**{k: jsonable(getattr(incident, k)) for k in KEYS}, "severity": incident.severity}


def text(incidents: list[dict], scope: str) -> str:
    if not incidents:
        return f"No incidents in {scope}: {NOTHING}.\n"
    ordered = sorted(incidents, key=severity)
    lines = [f"{len(ordered)} incident{'s' if len(ordered) != 1 else ''} in {scope}, most "
             "severe first.", ""]
    for number, incident in enumerate(ordered, start=1):
        lines.append(f"{number}. {incident['run']}: {_headline(incident)}")
        lines.append(f"   Likely cause{'s' if len(incident['causes']) > 1 else ''}: "
                     f"{', '.join(incident['causes'])}.")
        for cause, sentence in zip(incident["causes"], incident["evidence"], strict=True):
            source, sentence = split(sentence)  # "(logged: events.jsonl)" goes by the cause
            lines.append(f"   - {cause}{f' ({source})' if source else ''}: {sentence}")
        lines.append("")
    return "\n".join(lines)


def look_text(look: Look, scope: str) -> str:
    """The report of a Look: its incidents (``text``), then the files not read and, for each
    run read, what its lines could not show. "No incidents" is said only of runs whose lines
    were read."""
    if look.judged is None:  # a server answered: its incidents and its files not read
        return _served(look, scope)
    judged = look.judged or {}
    read = {run: j for run, j in judged.items() if j.lines}
    missed = {u.run for u in look.missed} | {run for run, j in judged.items() if not j.lines}
    parts = [text(look.incidents, scope)] if look.incidents else []
    clean = sorted(set(read) - missed - {i["run"] for i in look.incidents})
    if not look.incidents and read and not missed:
        parts.append(text([], scope))
    elif clean:
        parts.append(f"No incidents in {_runs(clean)}: {NOTHING}.\n")
    partly = sorted(set(read) & missed - {i["run"] for i in look.incidents})
    parts += [f"No incidents in the {read[r].lines} lines read of run {r}, but a file of it was "
              "not read (below): not clean.\n" for r in partly]
    parts += [_blind(read), _unread(look.unread)]
    empty = sorted(missed - set(read))
    if empty:
        parts.append(f"Nothing of {_runs(empty)} was read: not diagnosed, not clean.\n")
    if look.blank and not look.unread:
        parts.append(f"Nothing read in {scope}: no log file there (metrics.jsonl, *.jsonl, "
                     "trainer_state.json, events.out.tfevents.*, metrics.csv, *.log, *.txt, "
                     "*.out); not diagnosed, not clean.\n")
    if look.blank:
        parts.append(f"Exit status {UNREAD_EXIT}: nothing of {scope} was read.\n")
    elif look.missed:
        parts.append(MISSED_EXIT)
    return "\n".join(p for p in parts if p)


def _served(look: Look, scope: str) -> str:
    missed = look.missed
    if look.incidents or not missed:
        parts = [text(look.incidents, scope)]
    else:
        parts = [f"No incidents in the lines read of {scope}, but files were not read "
                 "(below): not clean.\n"]
    parts.append(_unread(look.unread or []))
    if missed:
        parts.append(MISSED_EXIT)
    return "\n".join(p for p in parts if p)


def _runs(names: list[str]) -> str:
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return f"run{'s' if len(names) > 1 else ''} {shown}"


def _blind(read: dict) -> str:
    lines = [f"- {run} ({j.lines} lines read): {'; '.join(j.blind)}."
             for run, j in sorted(read.items()) if j.blind]
    return "Not judged, for want of a field:\n" + "\n".join(lines) + "\n" if lines else ""


def _unread(unread: list[Unread]) -> str:
    lines = [f"- {u.file} (run {u.run}): {u.reason}"
             + (f" ({u.note})" if u.note else "")
             for u in unread]
    return "Files not read:\n" + "\n".join(lines) + "\n" if lines else ""


def look_json(look: Look) -> list[dict]:
    """``diagnose --json``: the incidents, then one object of kind ``unread`` per file whose
    absence leaves something of its run unseen (``file``, and ``reason`` as its evidence)."""
    return look.incidents + [
        {"run": u.run, "kind": "unread", "metric": None, "step": None, "end_step": None,
         "worst_step": None, "value": None, "baseline": None, "causes": ["unread"],
         "evidence": [u.reason], "severity": "critical", "file": u.file} for u in look.missed]


def _headline(i: dict) -> str:
    where = f"at step {i['step']}" + (f" (through {i['end_step']})"
                                      if i["end_step"] != i["step"] else "")
    value, base = _num(i["value"]), _num(i["baseline"])
    if i["kind"] == "stall":
        return (f"STALL {where}: {seconds(value)} without a log line, {value / base:.1f}x the "
                f"typical {seconds(base)}.")
    if i["kind"] == "two_writers":
        return f"TWO WRITERS {where}: two processes write this log (a finding, no incident)."
    if i["kind"] == "straggler":
        return (f"STRAGGLER {i['metric']} {where}: {seconds(value)} per step, "
                f"{value / base:.1f}x the other ranks' {seconds(base)}.")
    if i["kind"] == "nonfinite":
        last = "none" if i["baseline"] is None else f"{_num(i['baseline']):.4g}"
        return f"NON-FINITE {i['metric']} {where}: {i['value']} (last finite value {last})."
    if i["kind"] == "frozen":
        return (f"FROZEN {i['metric']} {where}: {i['value']!r} on every line, bit for bit: the "
                "run is not learning.")
    if i["kind"] == "crash":
        total = "" if i["baseline"] is None else f" of {int(_num(i['baseline']))}"
        at = "before its first step" if i["step"] < 0 else f"at step {i['step']}{total}"
        return f"CRASH: the run failed {at}."
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
