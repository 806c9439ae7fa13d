"""One webhook request and what came of it, told without the URL.

The URL is a secret (Slack's token is its last path part), and httpx puts it in some
exception messages and its INFO log lines, so nothing from a request is kept before
``scrub`` has taken every part of the URL out::

    post(client, url, body, key) -> Answer(http_status=None, retryable=True,
                                           error="ConnectError: [Errno 111] Connection refused")
    post(...)                    -> Answer(http_status=404, retryable=False, error="no_service")
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..lazy import LazyModule
from .targets import redact

# imported at the first send, in a delivery thread: not before the server answers (issue 23)
httpx = LazyModule("httpx")

ERROR_MAX = 500  # characters of an error or answer body kept in `deliveries.error`
SECRET_PART_MIN = 6  # path parts this long are tokens or ids: scrubbed wherever they appear


@dataclass(frozen=True)
class Answer:
    http_status: int | None  # None: no answer (connection refused, timeout)
    error: str | None  # None when sent; else what went wrong, scrubbed
    retryable: bool = False
    retry_after: float | None = None  # seconds a 429 asked us to wait
    elapsed_ms: float = 0.0

    @property
    def sent(self) -> bool:
        return self.error is None


def post(client: httpx.Client, url: str, body: bytes, key: str) -> Answer:
    """POST ``body`` (JSON) once; never raises for what the network or the webhook does."""
    started = time.monotonic()
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    try:
        response = client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        # timeouts, refused and reset connections: the webhook may be back later
        return Answer(None, scrub(f"{type(exc).__name__}: {exc}", url), retryable=True,
                      elapsed_ms=_ms(started))
    except (ValueError, OSError) as exc:
        # a URL httpx cannot send to at all: retrying cannot help, and must not hold up the
        # messages queued behind this one
        return Answer(None, scrub(f"{type(exc).__name__}: {exc}", url), retryable=False,
                      elapsed_ms=_ms(started))
    return judge(response, url, _ms(started))


def judge(response: httpx.Response, url: str, elapsed_ms: float = 0.0) -> Answer:
    status = response.status_code
    if 200 <= status < 300:
        return Answer(status, None, elapsed_ms=elapsed_ms)
    said = scrub(response.text.strip(), url) or response.reason_phrase
    if status == 429:
        return Answer(status, f"429 rate limited: {said}", True,
                      retry_after_s(response.headers.get("retry-after")), elapsed_ms)
    if status >= 500:
        return Answer(status, f"{status}: {said}", True, elapsed_ms=elapsed_ms)
    if 300 <= status < 400:
        said = "redirects are not followed: check the webhook URL"
    # Slack answers a bad message with 4xx and a word (invalid_payload, channel_not_found):
    # sending it again cannot help
    return Answer(status, said, False, elapsed_ms=elapsed_ms)


def retry_after_s(header: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not header:
        return None
    header = header.strip()
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def scrub(text: str, url: str) -> str:
    """``text`` without the URL or any long part of it (an exception or an answer body may
    echo either), cut to ERROR_MAX characters."""
    parts = urlsplit(url)
    secrets = [url, url.rstrip("/"), parts.path, parts.query]
    secrets += [p for p in parts.path.split("/") if len(p) >= SECRET_PART_MIN]
    secrets += [p for p in parts.query.split("&") if p]
    for secret in sorted({s for s in secrets if s and s != "/"}, key=len, reverse=True):
        # the whole URL first, shown redacted; a placeholder keeps later passes off that label
        text = text.replace(secret, "\0" if secret in (url, url.rstrip("/")) else "…")
    text = text.replace("\0", redact(url))
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 1] + "…"


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
