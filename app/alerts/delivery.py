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

A request whose answer came but whose record failed to commit is recorded again before
anything else is sent, so within one process nothing goes out twice; a crash in that instant
(after the webhook answered, before the commit) resends it after a restart with the same
Idempotency-Key: exactly once as far as HTTP allows.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import duckdb
import httpx

from ..db import queries
from ..errors import CliffwatchError
from . import webhook
from .answer import Answer, post, scrub
from .targets import LOG, Target, targets

log = logging.getLogger("cliffwatch.alerts")
IDLE_S = 1.0  # look at the outbox this often without a poke (a lost wake-up costs this much)
MIN_GAP_S = 1.0  # between requests to one webhook: Slack's one message per second
BACKOFF_CAP_S = 60.0  # longest wait between retries: a webhook back up is used within a minute
FORMATS = ("slack", "generic")


@dataclass(frozen=True)
class Head:
    """The oldest pending outbox row of a target, with its notification."""

    notification_id: int
    attempts: int
    next_time: float
    key: str
    created_time: float
    facts: dict


class DeliveryWorker:
    def __init__(self, db, settings, public_url: str | None = None, *,
                 backoff_cap_s: float = BACKOFF_CAP_S, min_gap_s: float = MIN_GAP_S):
        if settings.webhook_format not in FORMATS:
            raise CliffwatchError(f"--webhook-format {settings.webhook_format!r} is not known; "
                                  "use slack or generic (env CLIFFWATCH_WEBHOOK_FORMAT)")
        if not settings.webhook_timeout > 0:
            raise CliffwatchError(f"--webhook-timeout {settings.webhook_timeout:g} must be more "
                                  "than 0 seconds, e.g. 10 (env CLIFFWATCH_WEBHOOK_TIMEOUT)")
        self.db, self.settings = db, settings
        # an explicit --public-url wins over the server's own address
        self.public_url = settings.public_url or public_url or ""
        self.backoff_cap_s, self.min_gap_s = backoff_cap_s, min_gap_s
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
        """One line on a delivery lane that stopped on an error of ours, or None."""
        stuck = [lane.target.label for lane in self.lanes if lane.troubled]
        return (f"delivery to {', '.join(stuck)} stopped on an error; see the server log"
                if stuck else None)

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
    base = min(cap_s, 2.0 ** min(attempt - 1, 30))
    return base / 2 + random.uniform(0, base / 2)


def plan(answer: Answer, attempt: int, created_time: float, now: float, give_up_s: float,
         cap_s: float) -> tuple[str, str, float]:
    """(deliveries.outcome, outbox.status, outbox.next_time) after ``attempt`` came back."""
    if answer.sent:
        return "sent", "sent", now
    if not answer.retryable:
        return "failed", "failed", now
    wait = answer.retry_after if answer.retry_after is not None else backoff(attempt, cap_s)
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
        self.troubled = False  # a database problem was logged and has not cleared yet
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
            if self.unrecorded:
                self._record(*self.unrecorded)
                return 0.0
            head = self._head()
            if head is None:
                return IDLE_S
            wait = max(head.next_time - time.time(), self.ready_at - time.monotonic())
            if wait > 0:
                return wait
            started = time.time()
            answer = self._send(client, head)
            self.ready_at = time.monotonic() + (self.worker.min_gap_s if client else 0.0)
            self.unrecorded = (head, answer, started)
            self._record(head, answer, started)
            self.troubled = False
            return 0.0
        except Exception as exc:  # a bug or the database: say so once, keep the thread alive
            if not self.troubled:
                log.error("delivery to %s stopped on %s; retrying every %.0f s",
                          self.target.label, self._safe(exc), IDLE_S)
            self.troubled = True
            return IDLE_S

    def _head(self) -> Head | None:
        cur = self.worker.db.cursor()
        row = queries.execute(cur, "alerts/delivery_head", {"target": self.target.id}).fetchone()
        if row is None:
            return None
        nid, attempts, next_time, key, created, rule, run, metric, kind, severity, facts = row
        facts = webhook.parse_facts(facts)
        defaults = {"rule": rule, "run": run, "metric": metric, "kind": kind,
                    "severity": severity}
        for name, value in defaults.items():
            facts.setdefault(name, value)
        return Head(nid, attempts, next_time, key, created, facts)

    def _send(self, client, head: Head) -> Answer:
        link = webhook.link(self.worker.public_url, head.facts)
        if client is None:
            log.warning("alert: %s%s", webhook.text_line(head.facts), f" {link}" if link else "")
            return Answer(None, None)
        body = webhook.body(self.worker.settings.webhook_format, head.facts, head.key, link)
        return post(client, self.target.url, body, head.key)

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
