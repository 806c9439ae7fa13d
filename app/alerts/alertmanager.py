"""What Alertmanager gets (``--webhook-format alertmanager``): postable alerts for its
``/api/v2/alerts``, one per notification, and the list the delivery worker re-sends while
alerts fire::

    endpoint("http://alertmanager:9093") -> "http://alertmanager:9093/api/v2/alerts"
    postable(facts, subject="loss", fired=1764450000.0, now=1764450003.1, lease_s=240,
             link="http://127.0.0.1:8501/run?run=demo&from=0&to=130")
    -> {"labels": {"alertname": "nan-loss", "rule": "nan-loss", "run": "demo", "metric": "loss",
                   "severity": "critical", "source": "cliffwatch"},
        "annotations": {"summary": "loss is NaN at step 30", "description": "[CRITICAL] ...",
                        "value": "NaN", "step": "30",
                        "dashboard": "http://127.0.0.1:8501/run?run=demo&from=0&to=130"},
        "startsAt": "2025-11-29T21:00:00.000Z", "endsAt": "2025-11-29T21:04:03.100Z",
        "generatorURL": "http://127.0.0.1:8501/run?run=demo&from=0&to=130"}

Alertmanager tells alerts apart by their labels, so the labels hold only what names the alert
state, (rule, run, metric), and never change while it fires; what the message says goes in
the annotations. An incident's state is one incident, so its labels add ``kind`` and
``incident`` (``spike:loss@2029``): two spikes in one metric are two alerts.

Alertmanager drops an alert whose ``endsAt`` has passed. A firing alert is sent with ``endsAt``
LEASES re-send intervals ahead and sent again every interval while it fires (Prometheus does
the same: ``endsAt`` four resend delays ahead); a resolved one with ``endsAt`` = when it
resolved. An alert cliffwatch stops sending (its rule left the file, ``notify_resolved =
false``, the server stopped) resolves in Alertmanager when its lease runs out.
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit, urlunsplit

from .webhook import listed, number, text_line

PATH = "/api/v2/alerts"
LEASES = 4  # endsAt this many re-send intervals ahead: three re-sends may be lost
SOURCE = "cliffwatch"
TEST_ALERTNAME = "cliffwatch-test"
ANNOTATION_MAX = 4000  # characters per annotation: a pager's page, not a log


def endpoint(url: str) -> str:
    """The alerts endpoint of an Alertmanager given by its base URL (a path prefix such as
    ``/alertmanager`` from ``--web.route-prefix`` is kept) or by that endpoint itself."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    return urlunsplit(parts._replace(path=path))


def iso(seconds: float) -> str:
    """RFC 3339 in UTC with milliseconds, as Alertmanager writes times."""
    when = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def labels(facts: dict, subject: str | None) -> dict[str, str]:
    """What names the alert: rule, run, metric (and an incident's kind and key); severity."""
    if facts.get("kind") == "test":
        return {"alertname": TEST_ALERTNAME, "severity": "info", "source": SOURCE}
    rule = str(facts.get("rule") or "?")
    found = {"alertname": rule, "rule": rule, "run": facts.get("run"),
             "metric": facts.get("metric"), "severity": facts.get("severity") or "info",
             "source": SOURCE}
    if facts.get("type") == "incident" and subject and ":" in subject:
        # the state's metric is KIND:METRIC@STEP, the same in firing and resolved messages
        kind, rest = subject.split(":", 1)
        found.update(kind=kind, metric=rest.rsplit("@", 1)[0], incident=subject)
    return {name: str(value) for name, value in found.items() if value not in (None, "")}


def annotations(facts: dict, link: str | None) -> dict[str, str]:
    """What the message says, each as text; empty ones left out."""
    said = {"summary": facts.get("summary") or text_line(facts),
            "description": text_line(facts),
            "value": number(facts.get("value")) if facts.get("value") is not None else None,
            "typical": number(facts.get("typical"))
            if isinstance(facts.get("typical"), (int, float)) else facts.get("typical"),
            "step": facts.get("step"),
            "causes": listed(facts.get("causes"), numbered=True),
            "evidence": listed(facts.get("evidence")),
            "dashboard": link}
    checkpoint = facts.get("checkpoint")
    if isinstance(checkpoint, dict) and checkpoint.get("step") is not None:
        said["checkpoint"] = f"save at step {checkpoint['step']} has not ended" + (
            f" ({checkpoint['path']})" if checkpoint.get("path") else "")
    return {name: _cut(str(value)) for name, value in said.items()
            if value not in (None, "", "-")}


def postable(facts: dict, subject: str | None, fired: float | None, now: float,
             lease_s: float, link: str | None) -> dict:
    """One alert of ``POST /api/v2/alerts``: active until ``now + lease_s`` unless the facts
    are a resolution, which ends it when it resolved."""
    started = fired if fired is not None else float(facts.get("time") or now)
    if facts.get("kind") == "resolved":
        # never after now (Alertmanager would keep it active until then), never before start
        ends = max(started, min(float(facts.get("time") or now), now))
    else:
        ends = now + lease_s
    alert = {"labels": labels(facts, subject), "annotations": annotations(facts, link),
             "startsAt": iso(min(started, ends)), "endsAt": iso(ends)}
    if link:
        alert["generatorURL"] = link
    return alert


def _cut(text: str) -> str:
    return text if len(text) <= ANNOTATION_MAX else text[: ANNOTATION_MAX - 1] + "…"
