"""The delivery worker against a real HTTP receiver on 127.0.0.1 and a real DuckDB file; the
outbox rows are written directly, as the alert worker writes them (docs/alerts.md,
Contract 3). Nothing of ours is mocked."""

from __future__ import annotations

import itertools
import json
import logging
import time

import pytest

from app.alerts import webhook
from app.alerts.answer import Answer, retry_after_s, scrub
from app.alerts.delivery import BACKOFF_FLOOR_S, DeliveryWorker, backoff, plan
from app.alerts.targets import target_id, targets
from app.cli.main import build_parser
from app.db.database import Database
from app.errors import CliffwatchError
from app.settings import Settings, describe, resolve
from tests.app.webhook_receiver import HANG, Receiver, Reply
from tests.conftest import wait_for

FAST_RETRY_CAP_S = 2.0  # the real cap is 60 s; the waits are compressed, not the failures


def facts(i: int, kind: str = "firing", **more) -> dict:
    return {"rule": "loss-high", "type": "threshold", "severity": "critical", "kind": kind,
            "run": "demo", "metric": "loss", "value": 7.5 + i, "typical": 5.0, "step": 100 + i,
            "time": time.time(), "causes": ["learning rate too high"],
            "evidence": ["lr doubled at step 90"], "checkpoint": None,
            "summary": f"loss > 5 for 20 lines (now {7.5 + i} at step {100 + i})", **more}


def queue(db: Database, count: int, target_ids: list[str], start: int = 0) -> list[str]:
    """Notifications and their outbox rows in one transaction, as Contract 2 writes them."""
    cur = db.cursor()
    keys = []
    cur.begin()
    for i in range(start, start + count):
        key = f"k{i:03d}"
        nid = cur.execute(
            "INSERT INTO notifications (key, rule, run, metric, kind, severity, created_time, "
            "facts) VALUES (?, 'loss-high', 'demo', 'loss', 'firing', 'critical', ?, ?) "
            "RETURNING id", [key, time.time(), json.dumps(facts(i))]).fetchone()[0]
        for target in target_ids:
            cur.execute("INSERT INTO outbox (notification_id, target, status, next_time) "
                        "VALUES (?, ?, 'pending', ?)", [nid, target, time.time()])
        keys.append(key)
    cur.commit()
    return keys


def outbox(db: Database) -> list[tuple]:
    return db.cursor().execute("SELECT n.key, o.status, o.attempts FROM outbox o JOIN "
                               "notifications n ON n.id = o.notification_id "
                               "ORDER BY n.id").fetchall()


def deliveries(db: Database) -> list[tuple]:
    return db.cursor().execute("SELECT n.key, d.attempt, d.outcome, d.http_status, d.error "
                               "FROM deliveries d JOIN notifications n ON n.id = "
                               "d.notification_id ORDER BY d.id").fetchall()


@pytest.fixture
def receiver():
    with Receiver() as hook:
        yield hook


@pytest.fixture
def db(tmp_path):
    database = Database(tmp_path / "alerts.duckdb")
    yield database
    database.close()


@pytest.fixture
def start_worker():
    workers = []

    def start(db, settings, **kwargs) -> DeliveryWorker:
        workers.append(DeliveryWorker(db, settings, **kwargs))
        workers[-1].start()
        return workers[-1]

    yield start
    for worker in workers:
        worker.stop()


def test_failing_webhook_for_20s_gets_every_message_once_in_order(receiver, db, start_worker):
    """The issue's script: 500s, then a hang past the timeout, then 429 with Retry-After: 2,
    for 20 s in all; then healthy."""
    receiver.phases((8, Reply(500, "internal_error")), (6, HANG),
                    (6, Reply(429, "rate_limited", retry_after=2)))
    settings = Settings(webhook=receiver.url, webhook_timeout=1.0)
    keys = queue(db, 4, [target_id(receiver.url)])
    start_worker(db, settings, backoff_cap_s=FAST_RETRY_CAP_S)
    wait_for(lambda: len(receiver.delivered()) >= 4, timeout=45, interval=0.2)
    time.sleep(1.2)  # anything sent twice would arrive by now
    records = receiver.snapshot()
    assert [r.key for r in receiver.delivered()] == keys  # each once, in order
    order = [keys.index(r.key) for r in records]
    assert order == sorted(order), "a later message went out before an earlier one was done"
    gaps = [b.time - a.time for a, b in itertools.pairwise(records)]
    assert min(gaps) >= 1.0, f"two requests {min(gaps):.3f} s apart"
    after_429 = [b.time - a.time for a, b in itertools.pairwise(records)
                 if a.status == 429]
    assert after_429 and min(after_429) >= 2.0
    assert {r.status for r in records if not r.hung} >= {500, 429, 200}
    assert any(r.hung for r in records)
    assert records[-1].time - records[0].time >= 20
    assert len(deliveries(db)) == len(records)  # every attempt is a row
    assert [o[1] for o in outbox(db)] == ["sent"] * 4
    for record in receiver.delivered():
        assert record.headers["content-type"] == "application/json"
        assert record.json()["text"].startswith("[CRITICAL] loss-high on demo")


@pytest.mark.parametrize("retry_after", ["inf", "1e400", "Fri, 31 Dec 9999 23:59:59 GMT", "-5"])
def test_a_429_retry_after_is_held_between_the_backoffs_floor_and_cap(receiver, db,
                                                                      start_worker,
                                                                      retry_after):
    """Issue 18, finding 13: a 429 asking to wait forever (inf, 1e400, a date in the year
    9999) expired the message after one attempt; a negative one retried at once. The wait is
    held to [BACKOFF_FLOOR_S, the cap]: retried, delivered once, after at least the floor
    (no 1 s Slack gap here, so an immediate retry would show)."""
    receiver.script(Reply(429, "rate_limited", retry_after=retry_after))
    keys = queue(db, 1, [target_id(receiver.url)])
    start_worker(db, Settings(webhook=receiver.url, webhook_timeout=2.0),
                 backoff_cap_s=FAST_RETRY_CAP_S, min_gap_s=0.0)
    wait_for(lambda: outbox(db)[0][1] != "pending", timeout=15, interval=0.1)
    assert outbox(db) == [(keys[0], "sent", 2)]
    limited, sent = receiver.snapshot()
    assert (limited.status, sent.status) == (429, 200) and limited.key == sent.key == keys[0]
    assert sent.time - limited.time >= BACKOFF_FLOOR_S
    assert [d[2] for d in deliveries(db)] == ["retry", "sent"]


def test_4xx_is_failed_with_the_body_and_not_retried(receiver, db, start_worker):
    receiver.script(Reply(400, "invalid_payload"))
    keys = queue(db, 2, [target_id(receiver.url)])
    start_worker(db, Settings(webhook=receiver.url, webhook_timeout=2.0))
    wait_for(lambda: [o[1] for o in outbox(db)] == ["failed", "sent"], timeout=10)
    assert [(r.key, r.status) for r in receiver.snapshot()] == [(keys[0], 400), (keys[1], 200)]
    assert deliveries(db)[0] == (keys[0], 1, "failed", 400, "invalid_payload")


def test_gives_up_after_webhook_give_up(receiver, db, start_worker, caplog):
    receiver.answer_always(Reply(503, "down"))
    queue(db, 1, [target_id(receiver.url)])
    settings = Settings(webhook=receiver.url, webhook_timeout=1.0, webhook_give_up=1.5)
    start_worker(db, settings, backoff_cap_s=FAST_RETRY_CAP_S)
    wait_for(lambda: outbox(db)[0][1] == "expired", timeout=10)
    assert deliveries(db)[-1][2:4] == ("expired", 503)
    assert "gave up" in caplog.text


def test_without_webhook_each_notification_is_one_log_line(db, start_worker, caplog):
    caplog.set_level(logging.WARNING, logger="cliffwatch.alerts")
    queue(db, 3, ["log"])
    start_worker(db, Settings(public_url="http://dash:8501"))
    wait_for(lambda: [o[1] for o in outbox(db)] == ["sent"] * 3, timeout=10)
    lines = [r.getMessage() for r in caplog.records if r.name == "cliffwatch.alerts"]
    assert len(lines) == 3
    assert lines[0].startswith("alert: [CRITICAL] loss-high on demo: loss > 5")
    assert "http://dash:8501/run?run=demo&from=0&to=200" in lines[0]


def test_the_url_never_reaches_logs_errors_or_tables(receiver, db, start_worker, caplog):
    caplog.set_level(logging.DEBUG)
    url = receiver.url.replace("/hook", "/services/T0SECRET1/B0SECRET2/tok3nSECRETtoken")
    receiver.script(Reply(404, f"no_service at {url}"), Reply(500, f"boom {url}"))
    target = targets(Settings(webhook=url))[0]
    queue(db, 2, [target.id])
    receiver.refuse()  # the first attempt: connection refused
    start_worker(db, Settings(webhook=url, webhook_timeout=1.0), backoff_cap_s=1.0)
    wait_for(lambda: deliveries(db), timeout=10)
    receiver.listen()
    wait_for(lambda: [o[1] for o in outbox(db)] == ["failed", "sent"], timeout=15)
    errors = [d[4] for d in deliveries(db)]
    assert errors[0].startswith("ConnectError")
    assert "no_service at http://127.0.0.1" in errors[1]
    assert "http://127.0.0.1" in errors[2] and "…" in errors[2]
    for secret in ("SECRET", "tok3n"):
        assert secret not in caplog.text
        assert secret not in repr(target) and secret not in describe(Settings(webhook=url))
        assert not varchar_cells_containing(db, secret)


def varchar_cells_containing(db: Database, needle: str) -> list[tuple[str, str]]:
    """(table, column) of every text cell in the database holding ``needle``."""
    cur = db.cursor()
    columns = cur.execute("SELECT table_name, column_name FROM information_schema.columns "
                          "WHERE data_type LIKE 'VARCHAR%'").fetchall()
    found = []
    for table, column in columns:
        hit = cur.execute(f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS VARCHAR) '
                          "LIKE ?", [f"%{needle}%"]).fetchone()[0]
        if hit:
            found.append((table, column))
    return found


def test_webhook_flag_repeats_and_env_url_alias(monkeypatch):
    parser = build_parser()
    args = parser.parse_args(["serve", "--logdir", "x", "--webhook", "http://a/1",
                              "--webhook", "http://b/2"])
    assert resolve(args).webhook == "http://a/1,http://b/2"
    monkeypatch.delenv("CLIFFWATCH_WEBHOOK", raising=False)
    monkeypatch.setenv("CLIFFWATCH_WEBHOOK_URL", "http://c/in/3,http://d/in/4")
    settings = resolve(parser.parse_args(["serve", "--logdir", "x"]))
    assert [t.label for t in targets(settings)] == ["http://c/in/…", "http://d/in/…"]
    monkeypatch.setenv("CLIFFWATCH_WEBHOOK", "http://e/5")
    assert resolve(parser.parse_args(["serve", "--logdir", "x"])).webhook == "http://e/5"


def test_slack_payload_keeps_within_slack_limits():
    long = facts(1, rule="r" * 300, causes=["c" * 5000] * 3, evidence=["<!channel> & co"] * 2)
    payload = webhook.slack_payload(long, "key1", "http://h:1/run?run=demo&from=1&to=201")
    header, section = payload["blocks"][0], payload["blocks"][1]
    assert header["type"] == "header" and len(header["text"]["text"]) <= 150
    assert header["text"]["text"].startswith("CRITICAL: threshold on loss on demo · rule rrr")
    assert len(section["fields"]) <= 10
    assert all(len(f["text"]) <= 2000 for f in section["fields"])
    names = [f["text"].split("\n")[0] for f in section["fields"]]
    assert names == ["*Run*", "*Metric*", "*Value*", "*Typical value*", "*Step*", "*Causes*",
                     "*Evidence*"]
    assert "&lt;!channel&gt; &amp; co" in section["fields"][-1]["text"]
    link = "<http://h:1/run?run=demo&from=1&to=201|Open demo around step 101>"
    assert link in json.dumps(payload)


@pytest.mark.parametrize(("kind", "start"), [("firing", "[CRITICAL] loss-high on demo"),
                                             ("resolved", "RESOLVED: [CRITICAL] loss-high"),
                                             ("repeat", "Still firing: [CRITICAL]"),
                                             ("test", "Test message from cliffwatch")])
def test_text_tells_firing_resolved_repeat_and_test_apart(kind, start):
    assert webhook.text_line(facts(0, kind=kind)).startswith(start)


def test_generic_payload_has_the_same_facts_and_the_key():
    body = json.loads(webhook.body("generic", facts(0, value=float("nan")), "key7", None))
    assert body["idempotency_key"] == "key7" and body["value"] is None
    assert body["value_text"] == "NaN" and body["run"] == "demo" and body["step"] == 100
    assert body["causes"] == ["learning rate too high"] and body["resolved"] is False


def test_link_points_at_the_run_around_the_step():
    # the Run page zoomed on the alert's step (issue 9), not the old /?run=R&step=S
    assert webhook.link("http://127.0.0.1:8501/", {"run": "a b&c", "step": 7}) == (
        "http://127.0.0.1:8501/run?run=a+b%26c&from=0&to=107")
    assert webhook.link("http://h:1", {"run": "demo", "step": 500}) == (
        "http://h:1/run?run=demo&from=400&to=600")
    assert webhook.link("http://h:1", {"run": "demo"}) == "http://h:1/run?run=demo"
    assert webhook.link("", {"run": "demo"}) is None


def test_retry_after_seconds_and_http_date():
    assert retry_after_s("2") == 2.0
    assert retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", now=784111767.0) == 10.0
    assert retry_after_s("soon") is None


def test_plan_and_backoff():
    assert all(0.5 <= backoff(1, 60) <= 1.0 for _ in range(50))
    assert all(30 <= backoff(20, 60) <= 60 for _ in range(50))
    retry = Answer(500, "500: down", retryable=True)
    assert plan(retry, 1, 0.0, 10.0, 3600, 60)[:2] == ("retry", "pending")
    assert plan(retry, 1, 0.0, 3600.0, 3600, 60)[:2] == ("expired", "expired")
    limited = Answer(429, "429", retryable=True, retry_after=2.0)
    assert plan(limited, 5, 0.0, 10.0, 3600, 60) == ("retry", "pending", 12.0)
    for asked, waits in ((float("inf"), 60.0), (1e12, 60.0), (-5.0, BACKOFF_FLOOR_S),
                         (0.0, BACKOFF_FLOOR_S)):
        limited = Answer(429, "429", retryable=True, retry_after=asked)
        assert plan(limited, 1, 0.0, 10.0, 3600, 60) == ("retry", "pending", 10.0 + waits)
    unsaid = plan(Answer(429, "429", retryable=True, retry_after=float("nan")), 1, 0, 10, 3600, 60)
    assert 10.5 <= unsaid[2] <= 11.0  # NaN says nothing: the backoff
    assert plan(Answer(404, "no_service"), 1, 0.0, 10.0, 3600, 60)[:2] == ("failed", "failed")


def test_scrub_takes_every_part_of_the_url_out():
    url = "https://hooks.slack.com/services/T0AAAA/B0BBBB/xoxsecret99"
    text = scrub(f"ConnectError: cannot reach {url} (path /services/T0AAAA/B0BBBB/xoxsecret99,"
                 " token xoxsecret99)", url)
    assert "xoxsecret99" not in text and "T0AAAA" not in text
    assert "https://hooks.slack.com/services/T…/…" in text


def test_a_test_message_is_a_valid_slack_message_without_fields():
    payload = webhook.slack_payload({"kind": "test", "rule": "test", "severity": "info",
                                     "summary": "sent by `alerts test`"}, "test-1", None)
    assert payload["text"] == "Test message from cliffwatch: sent by `alerts test`"
    assert "fields" not in payload["blocks"][1]  # Slack refuses "fields": []


@pytest.mark.parametrize("url", ["hooks.slack.com/services/T0/B1/secret7", "ftp://h/in/secret7",
                                 "http:///in/secret7",
                                 # httpx accepts these, then fails at send time, for ever
                                 "https://h:99999/in/secret7", "https://[bad/in/secret7"])
def test_a_webhook_that_is_not_an_http_url_is_refused_redacted(url):
    with pytest.raises(CliffwatchError, match="is not an http\\(s\\) URL") as caught:
        DeliveryWorker(None, Settings(webhook=url))
    assert "secret7" not in str(caught.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T0123/B456/xyzsecret", "https://hooks.slack.com/services/T…/…"),
    ("http://127.0.0.1:9999/hook/abcdef", "http://127.0.0.1:9999/hook/…"),
    ("https://ntfy.example/SECRETTOPIC", "https://ntfy.example/…"),
    ("https://example.org/hook?token=SECRET", "https://example.org/…"),
])
def test_redacted_label_never_holds_the_secret_part(url, shown):
    from app.alerts.targets import redact

    assert redact(url) == shown
