"""The delivery worker: sends what the outbox holds, one thread ("lane") per webhook.

The alert worker writes each notification and its outbox rows in the same transaction as the
state change; this worker only reads pending rows and moves them on, so ingest and diagnosis
never wait on the network, and a restart sends whatever is still pending::

    outbox (pending) -> POST webhook -> deliveries row + outbox sent     (2xx)
                                     -> deliveries row, next_time later (timeout, refused, 5xx,
                                        429 after Retry-After) ... expired after webhook_give_up
                                     -> deliveries row + outbox failed  (other 4xx: not retried)

Per webhook: in notification order (a later message waits for the earlier one), one request
at a time, at least MIN_GAP_S between the end of one request and the start of the next
(Slack allows one message per second), each with settings.webhook_timeout. With no webhook
the one target is ``log``: each notification becomes one line of the server's log.

``--webhook-format alertmanager``: each message is a one-alert list for the Alertmanager's
``/api/v2/alerts`` (alertmanager.py), sent without the 1 s gap (Alertmanager takes
Prometheus's batches), and while alerts fire the lane re-sends them every
``alertmanager_resend`` seconds in lists of RESEND_BATCH, so that Alertmanager keeps them
active. The re-send reads what the outbox already sent (queries/alerts/delivery_firing.sql);
it writes no outbox rows and, like every request, happens only in this worker.

A request whose answer came but whose record failed to commit is recorded again before
anything else is sent, so within one process nothing goes out twice; a crash in that instant
(after the webhook answered, before the commit) resends it after a restart with the same
Idempotency-Key: exactly once as far as HTTP allows.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import duckdb
import orjson

from ..db import queries
from ..db.database import DatabaseLost
from ..errors import CliffwatchError
from ..lazy import LazyModule
from . import alertmanager, webhook
from .answer import Answer, post, scrub
from .targets import LOG, Target, targets

httpx = LazyModule("httpx")  # at a lane's first client, in its thread: not at start (issue 23)
log = logging.getLogger("cliffwatch.alerts")
IDLE_S = 5.0  # look at the outbox this often without a poke: every commit of outbox rows
# pokes, and a poke during a turn is seen by the next wait, so this is only a backstop
MIN_GAP_S = 1.0  # between requests to one webhook: Slack's one message per second
BACKOFF_CAP_S = 60.0  # longest wait between retries: a webhook back up is used within a minute
BACKOFF_FLOOR_S = 1.0  # the first retry's wait before jitter, and the least a 429 may ask for
FORMATS = ("slack", "generic", "alertmanager")
RESEND_BATCH = 500  # alerts per re-send request to Alertmanager


@dataclass(frozen=True)
class Head:
    """The oldest pending outbox row of a target, with its notification."""

    notification_id: int
    attempts: int
    next_time: float
    key: str
    created_time: float
    facts: dict
    subject: str | None = None  # the state's own metric (an incident's KIND:METRIC@STEP)


class DeliveryWorker:
    def __init__(self, db, settings, public_url: str | None = None, *,
                 backoff_cap_s: float = BACKOFF_CAP_S, min_gap_s: float = MIN_GAP_S,
                 rule_names: list[str] | None = None):
        if settings.webhook_format not in FORMATS:
            raise CliffwatchError(f"--webhook-format {settings.webhook_format!r} is not known; "
                                  "use slack, generic or alertmanager (env "
                                  "CLIFFWATCH_WEBHOOK_FORMAT)")
        if not settings.alertmanager_resend > 0:
            raise CliffwatchError(f"--alertmanager-resend {settings.alertmanager_resend:g} must "
                                  "be more than 0 seconds, e.g. 60 (env "
                                  "CLIFFWATCH_ALERTMANAGER_RESEND)")
        if not settings.webhook_timeout > 0:
            raise CliffwatchError(f"--webhook-timeout {settings.webhook_timeout:g} must be more "
                                  "than 0 seconds, e.g. 10 (env CLIFFWATCH_WEBHOOK_TIMEOUT)")
        self.db, self.settings = db, settings
        # an explicit --public-url wins over the server's own address
        self.public_url = settings.public_url or public_url or ""
        self.alertmanager = settings.webhook_format == "alertmanager"
        self.backoff_cap_s = backoff_cap_s
        self.min_gap_s = 0.0 if self.alertmanager else min_gap_s
        # the rules in force: a firing state of a rule no longer in the file is not re-sent
        # (None: every rule's)
        self.rule_names = None if rule_names is None else list(rule_names)
        self.targets = targets(settings)
        for target in self.targets:
            check_url(target)
        self.stopping = False
        self.lanes = [Lane(self, target) for target in self.targets]
        # httpx logs every request's URL (the secret) at INFO
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)

    def start(self) -> None:
        for lane in self.lanes:
            lane.thread.start()

    @property
    def failure(self) -> str | None:
        """One line on the delivery lanes that stopped on an error of ours (since when, the
        last error), or None."""
        now = time.monotonic()
        stuck = [f"delivery to {lane.target.label} failing for {now - trouble[0]:.0f} s: "
                 f"{trouble[1]}; retrying every {IDLE_S:.0f} s"
                 for lane in self.lanes if (trouble := lane.trouble) is not None]
        return "; ".join(stuck) or None

    def poke(self) -> None:
        """New outbox rows were committed (never blocks the caller)."""
        for lane in self.lanes:
            lane.wake.set()

    def stop(self) -> None:
        self.stopping = True
        self.poke()
        # a lane inside a request finishes it (up to the timeout); all lanes share one wait
        deadline = time.monotonic() + self.settings.webhook_timeout + 2
        for lane in self.lanes:
            if lane.thread.is_alive():
                lane.thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _facts(text, rule, run, metric, kind, severity) -> dict:
    """A notification's facts, its row's columns filling what they lack."""
    facts = webhook.parse_facts(text)
    defaults = {"rule": rule, "run": run, "metric": metric, "kind": kind, "severity": severity}
    for name, value in defaults.items():
        facts.setdefault(name, value)
    return facts


def check_url(target: Target) -> None:
    if target.url is None:
        return
    try:
        parts = urlsplit(target.url)
        port_ok = parts.port is None or parts.port > 0  # urlsplit raises past 65535
    except ValueError:  # a bad port or bracketed host: httpx would only fail at send time
        parts, port_ok = None, False
    if parts is None or not port_ok or parts.scheme not in ("http", "https") \
            or not parts.hostname:
        raise CliffwatchError(f"webhook {target.label} is not an http(s) URL; pass "
                              "--webhook https://hooks.slack.com/services/... (env "
                              "CLIFFWATCH_WEBHOOK_URL)")


def backoff(attempt: int, cap_s: float) -> float:
    """Seconds before retry ``attempt`` + 1: doubling from 1 s up to ``cap_s``, the upper half
    random ("equal jitter"), so many notifications stuck together do not retry in step."""
    base = min(cap_s, BACKOFF_FLOOR_S * 2.0 ** min(attempt - 1, 30))
    return base / 2 + random.uniform(0, base / 2)


def retry_wait(retry_after: float | None, attempt: int, cap_s: float) -> float:
    """Seconds before the next attempt: a 429's Retry-After held to [BACKOFF_FLOOR_S,
    ``cap_s``], else the backoff. A webhook's word is no reason to give up on a message
    (``inf``, ``1e400``, a date in the year 9999 expired it after one attempt) nor to hammer
    it (a negative one asked for a retry at once)."""
    if retry_after is None or math.isnan(retry_after):
        return backoff(attempt, cap_s)
    return min(cap_s, max(BACKOFF_FLOOR_S, retry_after))


def plan(answer: Answer, attempt: int, created_time: float, now: float, give_up_s: float,
         cap_s: float) -> tuple[str, str, float]:
    """(deliveries.outcome, outbox.status, outbox.next_time) after ``attempt`` came back."""
    if answer.sent:
        return "sent", "sent", now
    if not answer.retryable:
        return "failed", "failed", now
    wait = retry_wait(answer.retry_after, attempt, cap_s)
    if now + wait > created_time + give_up_s:
        return "expired", "expired", now
    return "retry", "pending", now + wait


class Lane:
    """One target's thread: its queue in order, its pace, its HTTP connection."""

    def __init__(self, worker: DeliveryWorker, target: Target):
        self.worker, self.target = worker, target
        self.wake = threading.Event()
        self.ready_at = 0.0  # monotonic time the next request may start
        self.unrecorded: tuple[Head, Answer, float] | None = None
        self.generation = getattr(worker.db, "generation", 0)  # the database opening it reads
        # (time.monotonic() since, the last error, whether it was logged): a database problem
        # or a bug, not cleared yet
        self.trouble: tuple[float, str, bool] | None = None
        # Alertmanager only: when firing alerts are next re-sent (monotonic; 0: at start, as
        # Alertmanager may have forgotten them meanwhile), and whether the last re-send failed
        self.resends = worker.alertmanager and target.url is not None
        self.resend_at = 0.0
        self.resend_failing = False
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name=f"cliffwatch-deliver-{target.id}")

    def _loop(self) -> None:
        settings = self.worker.settings
        client = (httpx.Client(timeout=settings.webhook_timeout, follow_redirects=False)
                  if self.target.url else None)
        try:
            while not self.worker.stopping:
                wait = self._turn(client)
                if wait > 0:
                    self.wake.wait(min(wait, IDLE_S))
                    self.wake.clear()
        finally:
            if client is not None:
                client.close()

    def _turn(self, client) -> float:
        """Record or send one thing if it is due; how long to wait before the next turn."""
        try:
            wait = self._step(client)
        except Exception as exc:  # a bug or the database: say so once, keep the thread alive
            self.worker.db.suspect(exc)  # an invalidated database: its keeper looks at once
            error = self._safe(exc)[:300]
            if self.trouble is not None:
                self.trouble = (self.trouble[0], error, self.trouble[2])
                return IDLE_S
            told = not isinstance(exc, DatabaseLost)  # the database says why, once
            if told:
                log.error("delivery to %s stopped on %s; retrying every %.0f s",
                          self.target.label, error, IDLE_S)
            self.trouble = (time.monotonic(), error, told)
            return IDLE_S
        self._recovered()
        return wait

    def _step(self, client) -> float:
        if self.unrecorded and self._stored_meanwhile():
            self.unrecorded = None
        if self.unrecorded:
            self._record(*self.unrecorded)
            return 0.0
        head = self._head()
        wait = IDLE_S if head is None else max(head.next_time - time.time(),
                                               self.ready_at - time.monotonic())
        if wait > 0:
            # nothing due in order: the time to keep Alertmanager's firing alerts active
            return min(wait, self._resend(client)) if self.resends else wait
        started = time.time()
        answer = self._send(client, head)
        self.ready_at = time.monotonic() + (self.worker.min_gap_s if client else 0.0)
        self.unrecorded = (head, answer, started)
        self._record(head, answer, started)
        return 0.0

    def _stored_meanwhile(self) -> bool:
        """After the database was opened again: whether the record whose COMMIT raised was
        stored all the same (DuckDB replayed it from its WAL), so it is not stored twice."""
        generation = self.worker.db.generation
        if generation == self.generation:
            return False
        head, (sent, _, _) = self._head(), self.unrecorded
        self.generation = generation
        return head is None or head.notification_id != sent.notification_id \
            or head.attempts > sent.attempts

    def _recovered(self) -> None:
        if self.trouble is not None and self.trouble[2]:
            log.warning("delivery to %s works again after %.0f s", self.target.label,
                        time.monotonic() - self.trouble[0])
        self.trouble = None

    def _head(self) -> Head | None:
        cur = self.worker.db.cursor()
        row = queries.execute(cur, "alerts/delivery_head", {"target": self.target.id}).fetchone()
        if row is None:
            return None
        nid, attempts, next_time, key, created, rule, run, metric, kind, severity, facts = row
        return Head(nid, attempts, next_time, key, created,
                    _facts(facts, rule, run, metric, kind, severity), metric)

    def _send(self, client, head: Head) -> Answer:
        link = webhook.link(self.worker.public_url, head.facts)
        if client is None:
            log.warning("alert: %s%s", webhook.text_line(head.facts), f" {link}" if link else "")
            return Answer(None, None)
        if self.resends:
            alert = alertmanager.postable(head.facts, head.subject, self._fired(head),
                                          time.time(), self._lease_s(), link)
            return post(client, alertmanager.endpoint(self.target.url), orjson.dumps([alert]),
                        head.key)
        body = webhook.body(self.worker.settings.webhook_format, head.facts, head.key, link)
        return post(client, self.target.url, body, head.key)

    def _fired(self, head: Head) -> float | None:
        """When the alert began firing (None for a test message)."""
        if head.facts.get("kind") == "test":
            return None
        row = queries.execute(self.worker.db.cursor(), "alerts/delivery_fired_at", {
            "rule": head.facts["rule"], "run": head.facts["run"] or "",
            "metric": head.subject or "", "before": head.created_time}).fetchone()
        return row[0] if row else None

    def _lease_s(self) -> float:
        return alertmanager.LEASES * self.worker.settings.alertmanager_resend

    def _resend(self, client) -> float:
        """Re-send the firing alerts this Alertmanager was told of, if due; seconds until the
        next re-send. A failure is logged once and tried again at the next interval."""
        due = self.resend_at - time.monotonic()
        if due > 0:
            return due
        every = self.worker.settings.alertmanager_resend
        self.resend_at = time.monotonic() + every
        rules = self.worker.rule_names
        rows = queries.execute(self.worker.db.cursor(), "alerts/delivery_firing", {
            "target": self.target.id, "all_rules": rules is None,
            "rules": rules or []}).fetchall()
        now, url = time.time(), alertmanager.endpoint(self.target.url)
        alerts = [self._alert(row, now) for row in rows]
        for start in range(0, len(alerts), RESEND_BATCH):
            batch = alerts[start:start + RESEND_BATCH]
            answer = post(client, url, orjson.dumps(batch), f"resend-{now:.3f}-{start}")
            if not answer.sent:
                if not self.resend_failing:
                    log.warning("%s did not take the re-send of %d firing alerts (%s); trying "
                                "again every %g s (--alertmanager-resend)", self.target.label,
                                len(alerts), answer.error, every)
                self.resend_failing = True
                return every
        if self.resend_failing:
            log.warning("%s took the re-send of %d firing alerts again", self.target.label,
                        len(alerts))
        self.resend_failing = False
        return every

    def _alert(self, row: tuple, now: float) -> dict:
        subject, facts, fired, rule, run, kind, severity = row
        facts = _facts(facts, rule, run, subject, kind, severity)
        return alertmanager.postable(facts, subject, fired, now, self._lease_s(),
                                     webhook.link(self.worker.public_url, facts))

    def _record(self, head: Head, answer: Answer, started: float) -> None:
        settings, attempt = self.worker.settings, head.attempts + 1
        outcome, status, next_time = plan(answer, attempt, head.created_time, time.time(),
                                          settings.webhook_give_up, self.worker.backoff_cap_s)
        cur = self.worker.db.cursor()
        cur.begin()
        try:
            queries.execute(cur, "alerts/delivery_attempt", {
                "notification_id": head.notification_id, "target": self.target.id,
                "attempt": attempt, "time": started, "outcome": outcome,
                "http_status": answer.http_status, "error": answer.error,
                "elapsed_ms": answer.elapsed_ms})
            queries.execute(cur, "alerts/delivery_outbox", {
                "notification_id": head.notification_id, "target": self.target.id,
                "status": status, "attempts": attempt, "next_time": next_time,
                "done_time": None if status == "pending" else time.time()})
            cur.commit()
        except duckdb.Error:
            self.worker.db.rollback(cur)
            raise
        self.unrecorded = None
        self._tell(head, outcome, answer, attempt, next_time)

    def _tell(self, head: Head, outcome: str, answer: Answer, attempt: int, next_time: float):
        what = f"notification {head.notification_id} ({head.facts.get('rule')})"
        where = self.target.label
        if outcome == "failed":
            log.warning("%s refused %s: %s; not retried", where, what, answer.error)
        elif outcome == "expired":
            log.warning("%s: gave up on %s after %d attempts (--webhook-give-up): %s",
                        where, what, attempt, answer.error)
        elif outcome == "retry" and attempt == 1:
            log.warning("%s did not take %s (%s); retrying in %.1f s, later ones wait", where,
                        what, answer.error, next_time - time.time())
        elif outcome == "sent" and attempt > 1:
            log.warning("%s took %s at attempt %d", where, what, attempt)

    def _safe(self, exc: Exception) -> str:
        text = f"{type(exc).__name__}: {exc}"
        return scrub(text, self.target.url) if self.target.url else text


__all__ = ["LOG", "DeliveryWorker", "backoff", "check_url", "plan"]
