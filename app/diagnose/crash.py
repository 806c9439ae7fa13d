"""A run whose log says it failed: a run_end event with status ``failed`` (our own
events.jsonl, or the text reader's torchelastic "failed (exitcode: N)" line,
ingest/formats/textevents.py) is an incident::

    Incident(run="n12", kind="crash", metric="run_end", step=8810, end_step=8810, value=None,
             baseline=20000.0, causes=["crash"], evidence=["the run failed at step 8810 of
             20000 (exitcode 1); last error: 'failed (exitcode: 1) local_rank: 0 ...'
             (logged: log line ... (train.log, byte 81234))"])

``step`` is the step reached, ``baseline`` the planned total of steps where a log says it.
Each failure of a run relaunched later is reported too (each was a real crash); its kind
ranks after spikes and stalls (diagnosis.KIND_RANK), so the incidents that explain a crash
come first. Whole-run and live diagnosis read the same query (diagnose/failures) over all
events or over a tick's new ones.
"""

from __future__ import annotations

import json

from ..db import queries
from . import system
from .detect import Incident
from .evidence import of_event, sourced

KIND = "crash"
METRIC = "run_end"  # the event that says it
ERROR_KEYS = ("error", "message", "reason", "exception")  # an event's own words for the error


def failures(cursor, run: str | None = None, after: int = -1,
             upto: int = 2 ** 62) -> list[Incident]:
    """The crash incidents of the failed run_end events stored at rowids after ``after`` up to
    ``upto``, of ``run`` (None: every run)."""
    rows = queries.execute(cursor, "diagnose/failures",
                           {"run": run, "after": after, "upto": upto}).fetchall()
    found: dict[tuple, Incident] = {}
    for name, _, step, planned, data in rows:
        incident = crash(name, step, planned, _data(data))
        found[incident.key] = incident  # relaunched and failed again at that step: one
    for incident in found.values():
        system.before_crash(cursor, incident)  # a GPU's memory full: out of memory, likely
    return list(found.values())


def crash(run: str, step: int | None, planned: int | None, data: dict) -> Incident:
    step = -1 if step is None else int(step)  # no step logged at all: before the first
    # no value: the step is the incident's own, and a "value against a typical" would misread
    incident = Incident(run, KIND, METRIC, step, step, None,
                        None if planned is None else float(planned), causes=[KIND])
    incident.evidence = [evidence(step, planned, data)]
    return incident


def evidence(step: int, planned: int | None, data: dict) -> str:
    """Where the run stopped, how, and the log's last error, with where that came from."""
    where = "before its first step" if step < 0 else f"at step {step}"
    total = f" of {planned}" if planned else ""
    code = f" (exitcode {data['exitcode']})" if data.get("exitcode") is not None else ""
    error = next((str(data[k]) for k in ERROR_KEYS if data.get(k)), None)
    said = f"; last error: {error!r}" if error else ""
    inferred, source = of_event({"data": data})
    return sourced(f"the run failed {where}{total}{code}{said}; read the log's last lines, "
                   "fix the cause and resume from the last checkpoint", inferred, source)


def _data(data) -> dict:
    if isinstance(data, dict):
        return data
    try:
        value = json.loads(data) if data else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
