"""What a notification says: Slack incoming-webhook payloads, a generic JSON object, and the
one line the server log gets (Alertmanager's alerts are alertmanager.py's). Pure functions of a
notification's facts (docs/alerts.md)::

    text_line(facts) -> "[CRITICAL] nan-loss on demo: loss is NaN at step 30"
    slack_payload(facts, key, link) -> {"text": "[CRITICAL] nan-loss on demo: ...",
        "blocks": [{"type": "header", "text": {"type": "plain_text",
                                  "text": "CRITICAL: NaN or inf in loss on demo · rule nan-loss"}},
                   {"type": "section", "text": ..., "fields": [Run, Metric, Value, Typical,
                                                               Step, Causes, Evidence]},
                   {"type": "section",
                    "text": "<http://127.0.0.1:8501/run?run=demo&from=0&to=130|...>"},
                   {"type": "context", ...}]}
    generic_payload(facts, key, link) -> {"idempotency_key": key, "rule": ..., "value": null,
                                          "value_text": "NaN", ...}
"""

from __future__ import annotations

import json
import math
from urllib.parse import urlencode

import orjson

# Slack's limits (api.slack.com/reference/block-kit/blocks): a header's text, a field's text,
# fields per section, a section's text; and the top-level text is cut well before 40,000.
HEADER_MAX = 150
FIELD_MAX = 2000
FIELDS_MAX = 10
SECTION_MAX = 3000
TEXT_MAX = 3000


def parse_facts(text) -> dict:
    """notifications.facts as a dict ({} if it is not a JSON object)."""
    try:
        facts = json.loads(text)  # json, not orjson: it reads NaN and Infinity
    except (TypeError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}


def text_line(facts: dict) -> str:
    """The fallback line: what a phone notification and the server log show."""
    kind = facts.get("kind")
    severity = str(facts.get("severity") or "info").upper()
    rule, run = facts.get("rule") or "?", facts.get("run")
    where = f" on {run}" if run else ""
    summary = facts.get("summary") or ""
    if kind == "test":
        line = f"Test message from cliffwatch{where}: {summary or 'webhook works'}"
    elif kind == "resolved":
        line = f"RESOLVED: [{severity}] {rule}{where}: {summary}"
    elif kind == "repeat":
        line = f"Still firing: [{severity}] {rule}{where}: {summary}"
    else:
        line = f"[{severity}] {rule}{where}: {summary}"
    return _cut(line.rstrip(": "), TEXT_MAX)


# a message's link opens the Run page this many steps either side of the alert's step: enough
# to see what led to it, few enough to be drawn at full resolution
AROUND_STEPS = 100


def around(step: int) -> tuple[int, int]:
    """The step range a link to ``step`` opens (from, to; inclusive)."""
    return max(0, int(step) - AROUND_STEPS), int(step) + AROUND_STEPS


def link(base_url: str, facts: dict) -> str | None:
    """The dashboard's Run page zoomed around that step (an incident's: around its episode,
    from its first step to its ``end_step``; the whole run without one), or None without a
    base address: ``http://127.0.0.1:8501/run?run=demo&from=0&to=130``."""
    if not base_url or not facts.get("run"):
        return None
    params = {"run": facts["run"]}
    if facts.get("step") is not None:
        params["from"], params["to"] = around(facts["step"])
        if _through(facts):  # an incident: its whole episode
            params["to"] = around(facts["end_step"])[1]
    return f"{base_url.rstrip('/')}/run?{urlencode(params)}"


FIGURES = 4  # significant figures of every number a message shows (13.03, 0.7392, 167.2 s)
# the rule types and incident kinds whose value is seconds (a stall's silence, the gap)
SECONDS = ("stall",)


def number(value, unit: str = "") -> str:
    """A value as people read it: FIGURES significant figures (no exponent from 10,000 up to
    10^15: a 12345 s silence is "12345 s"), its unit after it, NaN and inf spelled out."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = (str(value) if isinstance(value, int)
            else f"{value:.0f}" if 1e4 <= abs(value) < 1e15 else f"{value:.{FIGURES}g}")
    return f"{text} {unit}" if unit else text


def unit(facts: dict) -> str:
    """The unit of a notification's value and typical value: "s" for a stall (the rule or the
    incident) and a metric named ``*_s``, else none (a loss has no unit)."""
    metric = str(facts.get("metric") or "")
    if facts.get("type") in SECONDS or facts.get("incident") in SECONDS or metric.endswith("_s"):
        return "s"
    return ""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def body(fmt: str, facts: dict, key: str, link_url: str | None) -> bytes:
    """The request body for ``--webhook-format`` slack or generic (NaN and inf become null in
    JSON; the generic object keeps them readable in ``value_text``)."""
    build = generic_payload if fmt == "generic" else slack_payload
    return orjson.dumps(build(facts, key, link_url))


def slack_payload(facts: dict, key: str, link_url: str | None) -> dict:
    section = {"type": "section",
               "text": _mrkdwn(facts.get("summary") or text_line(facts), SECTION_MAX)}
    shown = [_mrkdwn(f"*{name}*\n{_escape(value)}", FIELD_MAX, escaped=True)
             for name, value in fields(facts)][:FIELDS_MAX]
    if shown:  # Slack refuses an empty list (invalid_blocks)
        section["fields"] = shown
    blocks = [{"type": "header", "text": {"type": "plain_text", "emoji": True,
                                          "text": _cut(header(facts), HEADER_MAX)}}, section]
    if link_url:
        label = f"Open {facts.get('run')}" + (
            f" around step {facts['step']}{_through(facts)}" if facts.get("step") is not None
            else "")
        blocks.append({"type": "section", "text": _mrkdwn(
            f"<{link_url}|{_escape(label)}>", SECTION_MAX, escaped=True)})
    context = f"cliffwatch · {facts.get('type') or 'rule'} rule · key {key}"
    blocks.append({"type": "context", "elements": [_mrkdwn(context, FIELD_MAX)]})
    return {"text": text_line(facts), "blocks": blocks}


def _through(facts: dict) -> str:
    end = facts.get("end_step")
    return f" through {end}" if isinstance(end, int) and end > facts["step"] else ""


def generic_payload(facts: dict, key: str, link_url: str | None) -> dict:
    names = ("rule", "type", "severity", "kind", "run", "metric", "value", "typical", "step",
             "time", "summary", "causes", "evidence", "checkpoint", "end_step", "worst_step")
    return {"idempotency_key": key, "text": text_line(facts),
            "resolved": facts.get("kind") == "resolved",
            **{name: facts.get(name) for name in names},
            "value_text": number(facts.get("value"), unit(facts)), "link": link_url}


def header(facts: dict) -> str:
    """What happened, to which run: ``WARNING: cliff in accuracy on demo-20261201-004400``
    (the rule's name after it where it says more than the kind: ``· rule loss-high``)."""
    severity = str(facts.get("severity") or "info").upper()
    kind = facts.get("kind")
    if kind == "test":
        return "cliffwatch test message"
    what = subject(facts) + (f" on {facts['run']}" if facts.get("run") else "")
    rule = facts.get("rule") or "?"
    if rule not in (facts.get("type"), facts.get("incident")):
        what += f" · rule {rule}"
    return {"resolved": f"RESOLVED: {what}",
            "repeat": f"Still firing - {severity}: {what}"}.get(kind, f"{severity}: {what}")


# incident kinds whose metric is no reading of the run's: a stall's is the gap, a crash's
# the run_end event that says it
NO_METRIC = ("stall", "crash")


def incident_subject(kind: str, metric: str | None) -> str:
    """``cliff in accuracy``; a stall is no stall "in gap_s", a crash none "in run_end"."""
    return kind if kind in NO_METRIC or not metric else f"{kind} in {metric}"


def subject(facts: dict) -> str:
    """The kind and the metric: ``cliff in accuracy``, ``NaN or inf in loss``, ``stall``."""
    metric, kind = facts.get("metric"), facts.get("incident")
    if kind:
        return incident_subject(kind, metric)
    rule_type = facts.get("type")
    if rule_type == "nonfinite":
        return f"NaN or inf in {metric}" if metric else "NaN or inf"
    if rule_type == "stall" or not metric:
        return str(rule_type or facts.get("rule") or "alert")
    return f"{rule_type} on {metric}"


def fields(facts: dict) -> list[tuple[str, str]]:
    """(name, text) of each fact the message shows, in order; empty ones left out."""
    shown = [("Run", facts.get("run")), ("Metric", facts.get("metric"))]
    if facts.get("value") is not None or facts.get("metric"):
        # an incident's value is its worst point, which need not be at its first step
        at = facts.get("worst_step")
        shown.append(("Value", number(facts.get("value"), unit(facts)) + (
            f" at step {at}" if at is not None and at != facts.get("step") else "")))
    shown += [("Typical value", _typical(facts.get("typical"), unit(facts))),
              ("Step", facts.get("step"))]
    checkpoint = facts.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("step") is not None:
        path = f" ({checkpoint['path']})" if checkpoint.get("path") else ""
        shown.append(("Checkpoint", f"save at step {checkpoint['step']}{path} has not ended"))
    shown += [("Causes", listed(facts.get("causes"), numbered=True)),
              ("Evidence", listed(facts.get("evidence")))]
    return [(name, str(value)) for name, value in shown if value not in (None, "", "-")]


def _typical(value, unit_text: str = "") -> str | None:
    if value is None or isinstance(value, (int, float)):
        return None if value is None else number(value, unit_text)
    return str(value)


def listed(items, numbered: bool = False) -> str | None:
    if not items:
        return None
    items = [items] if isinstance(items, str) else list(items)
    return "\n".join(f"{i}. {item}" if numbered else f"• {item}"
                     for i, item in enumerate(items, 1))


def _escape(text) -> str:
    # Slack's mrkdwn reads these three as markup: a run named <!channel> must not ping anyone
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _mrkdwn(text: str, limit: int, escaped: bool = False) -> dict:
    text = text if escaped else _escape(text)
    if len(text) > limit:
        text = text[: limit - 1]
        amp = text.rfind("&")
        if amp >= 0 and ";" not in text[amp:]:  # never cut an &amp; in half
            text = text[:amp]
        text += "…"
    return {"type": "mrkdwn", "text": text}
