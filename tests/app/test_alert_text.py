"""What a message at 3 a.m. says (issue 20, items 10-12): an incident resolves only once its
metric is back near its baseline; headers name the kind, run and metric; numbers carry the
same significant figures and their units; the test message says where it was sent from.
Real parts: the seed's logs read by the real tailer into a DuckDB file, live diagnosis, the
engine, the delivery worker and a real HTTP receiver."""

from __future__ import annotations

import os
import shutil
import time

import httpx
import orjson
import pytest

from app import settings as settings_mod
from app import state
from app.alerts import incident_rule as incidents
from app.alerts import webhook
from app.alerts.delivery import DeliveryWorker
from app.alerts.engine import Engine
from app.alerts.rules import Rule
from app.alerts.targets import target_id
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis
from app.ingest.worker import IngestWorker
from app.monitor import Monitor
from tests.app.webhook_receiver import Receiver
from tests.conftest import ROOT, SAMPLES, Server, run_cli, wait_for

INCIDENTS = Rule(name="incident", type="incident", kinds=("spike", "cliff", "stall"))


@pytest.fixture(scope="module")
def seed_told(tmp_path_factory):
    """Every message the seed's incidents send, fired and a minute later, as a receiver got
    them: [(notification kind, facts, the Slack body)]."""
    logs = tmp_path_factory.mktemp("text") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
    for path in (logs / "seed-cliff").iterdir():  # copied now, as a live run's files are
        os.utime(path)
    settings = settings_mod.resolve()
    monitor = Monitor.open(logs, settings)
    with Receiver() as hook:
        try:
            monitor.tailer.catch_up()
            LiveDiagnosis(monitor.db, Watch()).update()
            engine = Engine(monitor.db, [INCIDENTS], [target_id(hook.url)])
            # passes dated in the past, so that the worker sends what they queued at once
            then = time.time() - 120
            engine.evaluate(then)
            engine.evaluate(then + 61)  # none grew for a minute
            engine.evaluate(then + 62)  # looked at again at once: nothing new
            rows = monitor.db.cursor().execute(
                "SELECT kind, facts FROM notifications ORDER BY id").fetchall()
            worker = DeliveryWorker(monitor.db, settings_mod.Settings(webhook=hook.url),
                                    min_gap_s=0.0)
            worker.start()
            try:
                wait_for(lambda: len(hook.delivered()) >= len(rows), timeout=30)
            finally:
                worker.stop()
        finally:
            monitor.close()
        bodies = [r.json() for r in hook.delivered()]
    return [(kind, orjson.loads(facts), body)
            for (kind, facts), body in zip(rows, bodies, strict=True)]


def _about(told, phrase: str):
    """The messages about one incident, named as its summaries name it."""
    return [(kind, facts, body) for kind, facts, body in told if phrase in facts["summary"]]


def test_a_cliff_still_at_its_bottom_does_not_resolve_and_says_where_it_stands(seed_told):
    """Item 10: the seed's accuracy cliff (0.1608 -> 0.0007) is still at 0.0064 when it stops
    growing: no RESOLVED, one message saying it stopped getting worse and where it stands."""
    cliff = _about(seed_told, "cliff in accuracy at step 4231")
    assert [kind for kind, _, _ in cliff] == ["firing", "repeat"]
    _, facts, body = cliff[1]
    assert "stopped getting worse at step 4499 but has not recovered: still 0.0064 against " \
           "0.1608 before (bottom 0.0007 at step 4495)" in facts["summary"]
    assert "RESOLVED" not in body["text"] and "is over" not in body["text"]
    assert body["blocks"][0]["text"]["text"] == \
        "Still firing - WARNING: cliff in accuracy on seed-cliff"


def test_a_spike_that_came_back_resolves_with_where_it_stands(seed_told):
    spike = _about(seed_told, "spike in loss at step 2029")
    assert [kind for kind, _, _ in spike] == ["firing", "resolved"]
    summary = spike[1][1]["summary"]
    assert summary.startswith("spike in loss at step 2029 is over: back to ")
    assert summary.endswith(" against 0.7392 before (last grew at step 2035; peak 13)")
    assert spike[1][2]["blocks"][0]["text"]["text"] == "RESOLVED: spike in loss on seed-cliff"


def test_headers_name_kind_run_and_metric_and_seconds_carry_units(seed_told):
    """Item 11: not "WARNING: incident"; a stall's seconds with "s"; 4 significant figures
    in the summary and the fields alike."""
    headers = {body["blocks"][0]["text"]["text"] for kind, _, body in seed_told
               if kind == "firing"}
    assert headers == {"WARNING: spike in loss on seed-cliff",
                       "WARNING: cliff in accuracy on seed-cliff",
                       "WARNING: stall on seed-cliff"}
    (_, stall, body), *_ = _about(seed_told, "stall at step 2027")
    fields = dict(webhook.fields(stall))
    assert (fields["Value"], fields["Typical value"]) == ("167.2 s", "10 s")
    assert "stall at step 2027: gap 167.2 s against a typical 10 s" in stall["summary"]
    assert stall["metric"] == "gap_s"
    assert "*Value*\\n167.2 s" in orjson.dumps(body).decode()
    (_, spike, _), *_ = _about(seed_told, "spike in loss at step 2029")
    assert "peak 13 against a typical 0.7392" in spike["summary"]
    assert dict(webhook.fields(spike))["Typical value"] == "0.7392"


@pytest.mark.parametrize(("value", "unit", "shown"), [
    (13.148, "", "13.15"), (13.03, "", "13.03"), (0.00070001, "", "0.0007"),
    (12345.6, "s", "12346 s"), (88.0, "s", "88 s"), (float("nan"), "", "NaN"), (7, "", "7")])
def test_numbers_have_four_significant_figures_and_their_unit(value, unit, shown):
    assert webhook.number(value, unit) == shown


def test_a_user_rule_header_names_the_rule_too():
    facts = {"rule": "loss-high", "type": "threshold", "severity": "critical", "kind": "firing",
             "run": "demo", "metric": "loss"}
    assert webhook.header(facts) == "CRITICAL: threshold on loss on demo · rule loss-high"
    stall = {**facts, "rule": "stall", "type": "stall", "metric": None, "value": 88.25,
             "typical": 1.0}
    assert webhook.header(stall) == "CRITICAL: stall on demo"
    assert dict(webhook.fields(stall))["Value"] == "88.25 s"


def test_a_crash_header_names_no_metric_as_its_summary_does():
    # the run_end event says a run failed; it is no metric of the run's (as a stall's gap)
    crash = incidents.Found(run="n12", kind="crash", metric="run_end", step=8810, end_step=8810,
                            worst_step=None, value=None, baseline=20000.0, causes=["crash"],
                            evidence=[], updated_at=None)
    facts = {"rule": "incident", "type": "incident", "severity": "warning", "kind": "firing",
             "run": "n12", **incidents.facts(crash)}
    assert facts["summary"].startswith("crash at step 8810")
    assert webhook.header(facts) == "WARNING: crash on n12"




def _tests_sent(hook: Receiver, count: int) -> list[str]:
    wait_for(lambda: len([r for r in hook.delivered() if "Test message" in r.json()["text"]])
             >= count, timeout=30)
    return [r.json()["text"] for r in hook.delivered() if "Test message" in r.json()["text"]]


def test_the_test_message_says_where_it_was_sent_from(tmp_path):
    """Item 12: `python -m app alerts test`, a bare POST and {"from": "cliffwatch"} (the
    installed command) each say so; an unknown "from" is refused and says which exist."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with Receiver() as hook:
        server = Server(logs, "--webhook", hook.url)
        try:
            done = run_cli("alerts", "test", "--logdir", str(logs), timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
            assert httpx.post(server.url + "/api/alerts/test", timeout=30).status_code == 200
            assert httpx.post(server.url + "/api/alerts/test", json={"from": "cliffwatch"},
                              timeout=30).status_code == 200
            refused = httpx.post(server.url + "/api/alerts/test", json={"from": "me"},
                                 timeout=30)
            texts = _tests_sent(hook, 3)
        finally:
            server.stop()
    assert texts == [
        "Test message from cliffwatch: sent from `python -m app alerts test`; this webhook works",
        "Test message from cliffwatch: sent from a POST to /api/alerts/test; this webhook works",
        "Test message from cliffwatch: sent from `cliffwatch alerts test`; this webhook works"]
    assert refused.status_code == 400
    assert "dashboard, cliffwatch, python -m app, api; got 'me'" in refused.text


def test_the_dashboard_button_says_it_was_the_dashboard(tmp_path):
    """Item 12: the Alerts page's button, pressed in Streamlit's AppTest against a real
    database and a real delivery worker."""
    from streamlit.testing.v1 import AppTest

    logs = tmp_path / "logs"
    logs.mkdir()
    settings = settings_mod.Settings()
    monitor = Monitor.open(logs, settings)
    with Receiver() as hook:
        worker = DeliveryWorker(monitor.db, settings_mod.Settings(webhook=hook.url),
                                min_gap_s=0.0)
        worker.start()
        state.set_current(state.ServerState(monitor, IngestWorker(monitor.tailer, settings),
                                            settings, delivery=worker))
        try:
            at = AppTest.from_file(str(ROOT / "app" / "dashboard" / "main.py"),
                                   default_timeout=60).run()
            at.switch_page("views/alerts.py").run()
            next(b for b in at.button if b.label == "Send test message").click().run()
            assert not at.exception, [e.message for e in at.exception]
            (text,) = _tests_sent(hook, 1)
        finally:
            state.set_current(None)
            worker.stop()
            monitor.close()
    assert text == ("Test message from cliffwatch: sent from the dashboard's Send test message "
                    "button (Alerts page); this webhook works")
