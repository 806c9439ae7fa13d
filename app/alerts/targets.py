"""Where notifications go: the configured webhooks, each known by an id that is safe to store
and show (the URL is a secret: it carries Slack's token in its path)::

    targets(settings)  -> [Target(id="w3f9a1c2b7d40", url="https://hooks.slack.com/...")]
    redact("https://hooks.slack.com/services/T0/B1/xyz") -> "https://hooks.slack.com/services/T…/…"

With no webhook configured the one target is ``log``: notifications still go through the
outbox and are written to the server's log.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from urllib.parse import urlsplit

LOG = "log"


@dataclass(frozen=True)
class Target:
    id: str  # stored in `outbox` and `deliveries`; never the URL
    url: str | None  # None for the log target

    def __repr__(self) -> str:  # a Target in a traceback or log line must not leak its URL
        return f"Target({self.id}, {redact(self.url) if self.url else 'log'})"

    @property
    def label(self) -> str:
        return redact(self.url) if self.url else "server log"


def webhook_urls(settings) -> list[str]:
    return [u.strip() for u in (settings.webhook or "").split(",") if u.strip()]


def targets(settings) -> list[Target]:
    urls = webhook_urls(settings)
    if not urls:
        return [Target(LOG, None)]
    return [Target(target_id(u), u) for u in urls]


def target_id(url: str) -> str:
    return "w" + hashlib.sha256(url.encode()).hexdigest()[:12]


def redact(url: str) -> str:
    """Scheme, host and the first letter of the first two path parts: enough to tell two
    webhooks apart, not enough to post to one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # a bad port or bracketed host: show nothing of it
        return "(a webhook URL that cannot be parsed)"
    path = [p for p in parts.path.split("/") if p]
    # a one-part path may itself be the secret (an ntfy topic, a token): show none of it
    shown = path[:2] if path and path[0] == "services" else path[:1] if len(path) > 1 else []
    tail = "/".join([*shown[:1], *(f"{p[:1]}…" for p in shown[1:2])])
    rest = "/…" if len(path) > len(shown) or parts.query else ""
    host = (parts.hostname or "?") + (f":{port}" if port else "")
    return f"{parts.scheme}://{host}/{tail}{rest}".replace("//…", "/…")
