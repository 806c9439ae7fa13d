"""`--webhook-format alertmanager` against a real Alertmanager (Debian's 0.25, started here) and
a plain receiver, through the real server: a NaN fires, Alertmanager lists the alert with its
labels and keeps it active through re-sends, a finite line resolves it, and Alertmanager's own
webhook says so."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import httpx
import pytest

from app.alerts import alertmanager
from app.alerts.delivery import DeliveryWorker
from app.alerts.targets import target_id
from app.db.database import Database
from app.errors import CliffwatchError
from app.settings import Settings
from tests.app.engines import alertmanager as start_alertmanager
from tests.app.engines import engine
from tests.app.webhook_receiver import Receiver, Reply
from tests.conftest import Server, wait_for

RESEND_S = 0.5  # --alertmanager-resend: endsAt is 4 × this (2 s) ahead
SECRET_PATH = "/am/SECRETtoken0123456789"
RULES = """\
[[rule]]
name = "nan-loss"
type = "nonfinite"
severity = "critical"
metrics = ["loss"]
"""
# Alertmanager's route as docs/alerts.md suggests it, sending to a receiver of ours at once
AM_CONFIG = """\
route:
  receiver: team
  group_by: [rule, run]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: team
    webhook_configs:
      - url: {url}
        send_resolved: true
"""
LABELS = {"alertname": "nan-loss", "rule": "nan-loss", "run": "nan1", "metric": "loss",
          "severity": "critical", "source": "cliffwatch"}


def seconds(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def write(logs: Path, run: str, steps, loss) -> None:
    (logs / run).mkdir(parents=True, exist_ok=True)
    with open(logs / run / "metrics.jsonl", "a") as out:
        for step in steps:
            out.write(json.dumps({"step": step, "loss": loss(step)}) + "\n")


def ours(alerts: list[dict], run: str = "nan1") -> list[dict]:
    return [a for a in alerts if a["labels"].get("run") == run]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Alertmanager (routing to `team`), a plain receiver standing in for a second
    Alertmanager, and the server sending to both."""
    engine("prometheus-alertmanager")
    root = tmp_path_factory.mktemp("alertmanager")
    logs = root / "logs"
    logs.mkdir()
    (logs / "alerts.toml").write_text(RULES)
    with Receiver(path="/team") as team, Receiver(path=SECRET_PATH) as plain, \
            start_alertmanager(root / "am", AM_CONFIG.format(url=team.url)) as am:
        # the plain receiver's first answer echoes its URL: it must be scrubbed everywhere
        plain.script(Reply(500, body=f"no hook at {plain.url}/api/v2/alerts"))
        server = Server(logs, "--webhook", am.url, "--webhook", plain.url, "--webhook-format",
                        "alertmanager", "--alertmanager-resend", str(RESEND_S),
                        "--webhook-timeout", "2")
        try:
            yield {"am": am, "team": team, "plain": plain, "server": server, "logs": logs}
        finally:
            server.stop()


@pytest.fixture(scope="module")
def story(fleet):
    """A NaN at step 30 fires; Alertmanager is looked at while it fires, again after two
    leases, and after a finite line at step 31 resolved it."""
    am, logs = fleet["am"], fleet["logs"]
    write(logs, "nan1", range(1, 31), lambda s: float("nan") if s == 30 else 1.0 / s)
    firing = wait_for(lambda: ours(am.alerts()), timeout=15)[0]
    time.sleep(alertmanager.LEASES * RESEND_S + 1)  # past its lease: only re-sends keep it
    kept = ours(am.alerts())
    write(logs, "nan1", [31], lambda s: 1.0 / s)
    resolved_at = time.time()
    wait_for(lambda: not ours(am.alerts()), timeout=10)
    told = wait_for(lambda: [m for m in _team(fleet) if m["status"] == "resolved"], timeout=10)
    return {"firing": firing, "kept": kept, "resolved_at": resolved_at, "team": _team(fleet),
            "told_resolved": told[0]}


def _team(fleet) -> list[dict]:
    """What Alertmanager itself sent its receiver, for our run."""
    return [m for m in (r.json() for r in fleet["team"].delivered())
            if m["groupLabels"].get("run") == "nan1"]


def _plain(fleet, run: str = "nan1") -> list[tuple[float, dict]]:
    """(arrival, alert) of every alert of ``run`` the plain receiver took, in order."""
    return [(r.time, alert) for r in fleet["plain"].delivered() for alert in r.json()
            if alert["labels"].get("run") == run]


def test_alertmanager_lists_the_firing_alert_with_labels_and_annotations(fleet, story):
    alert, url = story["firing"], fleet["server"].url
    assert alert["labels"] == LABELS
    assert alert["status"]["state"] == "active"
    notes = alert["annotations"]
    assert notes["summary"].startswith("loss is NaN at step 30"), notes
    assert notes["description"].startswith("[CRITICAL] nan-loss on nan1: loss is NaN")
    assert notes["value"] == "NaN" and notes["step"] == "30"
    assert notes["dashboard"] == f"{url}/run?run=nan1&from=0&to=130"
    assert alert["generatorURL"] == notes["dashboard"]
    # a lease ahead of when it was sent, not Alertmanager's 5-minute resolve_timeout
    assert 0 < seconds(alert["endsAt"]) - seconds(alert["updatedAt"]) <= 4 * RESEND_S + 1


def test_firing_alert_is_resent_so_it_outlives_its_lease(fleet, story):
    kept, first = story["kept"], story["firing"]
    assert len(kept) == 1 and kept[0]["status"]["state"] == "active"
    assert kept[0]["fingerprint"] == first["fingerprint"]
    assert kept[0]["startsAt"] == first["startsAt"]
    assert seconds(kept[0]["endsAt"]) > seconds(first["endsAt"]) + 1
    firing = [a for _, a in _plain(fleet) if seconds(a["endsAt"]) > seconds(a["startsAt"])]
    assert len(firing) >= 4, "one firing message, then a re-send every 0.5 s"


def test_resolution_reaches_alertmanager_and_its_receiver(fleet, story):
    told = story["told_resolved"]
    assert told["groupLabels"] == {"rule": "nan-loss", "run": "nan1"}
    (alert,) = told["alerts"]
    assert alert["status"] == "resolved" and alert["labels"] == LABELS
    assert alert["generatorURL"].endswith("/run?run=nan1&from=0&to=131")
    ends = seconds(alert["endsAt"])
    assert story["resolved_at"] - 1 <= ends <= time.time()
    assert seconds(alert["startsAt"]) == seconds(story["firing"]["startsAt"])
    assert [m["status"] for m in story["team"]][:1] == ["firing"]


def test_plain_receiver_gets_the_postable_list_and_nothing_after_resolved(fleet, story):
    # its own lane: the resolution may reach it a moment after Alertmanager's
    wait_for(lambda: seconds(_plain(fleet)[-1][1]["endsAt"]) <= _plain(fleet)[-1][0])
    records = fleet["plain"].delivered()
    assert records and {r.path for r in records} == {SECRET_PATH + "/api/v2/alerts"}
    assert all(r.headers["content-type"] == "application/json" for r in records)
    got = _plain(fleet)
    for _, alert in got:
        assert set(alert) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
        assert alert["labels"] == LABELS
        assert set(alert["annotations"]) <= {"summary", "description", "value", "step",
                                             "dashboard", "typical", "causes", "evidence"}
    arrived, last = got[-1]
    assert last["annotations"]["summary"].startswith("loss is finite again"), last
    assert seconds(last["endsAt"]) <= arrived and last["startsAt"] == got[0][1]["startsAt"]
    time.sleep(2 * RESEND_S + 0.2)
    assert _plain(fleet)[-1] == (arrived, last), "a resolved alert is not re-sent"


def test_alerts_test_reaches_alertmanager(fleet, story):
    result = httpx.post(fleet["server"].url + "/api/alerts/test", timeout=10).json()["results"]
    assert [(r["status"], r["http_status"]) for r in result] == [("sent", 200)] * 2, result
    listed = wait_for(lambda: [a for a in fleet["am"].alerts()
                               if a["labels"]["alertname"] == "cliffwatch-test"])
    assert listed[0]["labels"] == {"alertname": "cliffwatch-test", "severity": "info",
                                   "source": "cliffwatch"}
    assert "this webhook works" in listed[0]["annotations"]["summary"]


def test_webhook_url_is_in_no_output_api_or_table(fleet, story):
    server = fleet["server"]
    failed = server.sql("SELECT error FROM deliveries WHERE outcome = 'retry'").json()["rows"]
    assert failed and "http://127.0.0.1" in failed[0][0], "the echoed URL, redacted"
    api = httpx.get(server.url + "/api/alerts").text
    columns = server.sql("SELECT table_name, column_name FROM information_schema.columns "
                         "WHERE data_type LIKE 'VARCHAR%'").json()["rows"]
    assert len(columns) > 20
    found = " UNION ALL ".join(f"SELECT '{t}.{c}' FROM \"{t}\" WHERE CAST(\"{c}\" AS VARCHAR) "
                               "LIKE '%SECRET%'"
                               for t, c in columns)
    answer = server.sql(found).json()
    assert answer.get("rows") == [], answer
    for text in (api, Path(server.log.name).read_text()):
        assert "SECRET" not in text
    assert "/am/…" in api


@pytest.mark.parametrize("given, posted", [
    ("http://am:9093", "http://am:9093/api/v2/alerts"),
    ("http://am:9093/", "http://am:9093/api/v2/alerts"),
    ("http://am:9093/api/v2/alerts", "http://am:9093/api/v2/alerts"),
    ("https://ops.example/alertmanager/", "https://ops.example/alertmanager/api/v2/alerts"),
    ("http://am:9093?tenant=a", "http://am:9093/api/v2/alerts?tenant=a"),
])
def test_endpoint_takes_the_base_url_or_the_alerts_path(given, posted):
    assert alertmanager.endpoint(given) == posted


def test_incident_alerts_are_one_per_incident_and_resolve_in_the_past():
    facts = {"rule": "diagnosis", "type": "incident", "severity": "info", "kind": "resolved",
             "run": "gpt", "metric": "loss", "time": 2000.0, "summary": "spike is over"}
    alert = alertmanager.postable(facts, "spike:loss@2029", fired=1000.0, now=1500.0,
                                  lease_s=240, link=None)
    assert alert["labels"] == {"alertname": "diagnosis", "rule": "diagnosis", "run": "gpt",
                               "metric": "loss", "severity": "info", "source": "cliffwatch",
                               "kind": "spike", "incident": "spike:loss@2029"}
    # resolved: ends when it resolved, but never after now (it would stay active until then)
    assert (alert["startsAt"], alert["endsAt"]) == (alertmanager.iso(1000.0),
                                                     alertmanager.iso(1500.0))
    assert "generatorURL" not in alert


def _firing(cur, rule: str, run: str, state: str, at: float) -> int:
    """An alert state and its firing message, as the alert worker writes them."""
    cur.execute("INSERT INTO alert_states (rule, run, metric, state, episode, changed_time) "
                "VALUES (?, ?, 'loss', ?, 1, ?)", [rule, run, state, at])
    facts = {"rule": rule, "type": "threshold", "severity": "warning", "kind": "firing",
             "run": run, "metric": "loss", "time": at, "summary": f"{run} fires"}
    nid = cur.execute("INSERT INTO notifications (key, rule, run, metric, kind, severity, "
                      "created_time, facts) VALUES (?, ?, ?, 'loss', 'firing', 'warning', ?, ?) "
                      "RETURNING id", [f"{rule}-{run}", rule, run, at, json.dumps(facts)]
                      ).fetchone()[0]
    return nid


def test_resend_carries_only_delivered_alerts_still_firing_of_rules_in_force(tmp_path):
    """Re-sent: a delivered firing of a rule in the file. Not: a rule taken out of the file, a
    state that resolved, a firing still waiting in the outbox (it goes out in order)."""
    db = Database(tmp_path / "alerts.duckdb")
    with Receiver(path="/am") as am:
        target, now = target_id(am.url), time.time()
        cur = db.cursor()
        for rule, run, state, status in [("kept", "a", "firing", "sent"),
                                         ("gone", "b", "firing", "sent"),
                                         ("kept", "c", "firing", "pending"),
                                         ("kept", "d", "resolved", "sent")]:
            nid = _firing(cur, rule, run, state, now - 10)
            cur.execute("INSERT INTO outbox (notification_id, target, status, next_time) "
                        "VALUES (?, ?, ?, ?)", [nid, target, status, now + 3600])
        settings = Settings(webhook=am.url, webhook_format="alertmanager",
                            alertmanager_resend=0.2)
        worker = DeliveryWorker(db, settings, "http://127.0.0.1:8501", rule_names=["kept"])
        worker.start()
        try:
            wait_for(lambda: len(am.delivered()) >= 3, timeout=10)
        finally:
            worker.stop()
            db.close()
    records = am.delivered()
    assert {r.path for r in records} == {"/am/api/v2/alerts"}
    for record in records:
        (alert,) = record.json()
        assert alert["labels"]["run"] == "a" and alert["annotations"]["summary"] == "a fires"
        assert alert["startsAt"] == alertmanager.iso(now - 10)
        assert 0.8 - 0.2 <= seconds(alert["endsAt"]) - record.time <= 0.8 + 0.1
    assert records[-1].time - records[0].time >= 2 * 0.2 - 0.05, "one re-send per interval"


@pytest.mark.parametrize("settings, says", [
    (Settings(webhook_format="alertmanager", alertmanager_resend=0.0),
     "--alertmanager-resend 0 must be more than 0 seconds"),
    (Settings(webhook_format="prometheus"), "use slack, generic or alertmanager"),
])
def test_bad_alertmanager_settings_stop_serve_with_the_flag_to_fix(settings, says):
    with pytest.raises(CliffwatchError, match=says):
        DeliveryWorker(None, settings)
