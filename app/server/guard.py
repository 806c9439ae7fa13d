"""Who may talk to the server: the Host, Origin and token check in front of every path.

A web page the user visits can reach a server on the user's own machine by rebinding its
domain name to 127.0.0.1 (DNS rebinding); its requests then carry the page's name in ``Host``
and the page's origin in ``Origin``. So every request, the dashboard and its websocket
included, must name this server in ``Host`` and, when it carries an ``Origin``, come from a
page of this server::

    Host: evil.example:8501                  -> 403
    Origin: http://evil.example:8501         -> 403
    Host: 127.0.0.1:8501, no token needed    -> on to Streamlit or /api

A server that others can reach (any address but loopback) also wants a token: as
``Authorization: Bearer TOKEN`` from programs, or, in a browser, once in the address
(``/?token=TOKEN``), which sets an HttpOnly, SameSite=Strict cookie for later loads and the
websocket.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (``localhost``, 127.0.0.0/8, ::1)."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str | None:
    """The lower-case name in a Host header (``Example.org:8501`` -> ``example.org``,
    ``[::1]:8501`` -> ``::1``), or None when it is not a plain host[:port]."""
    try:
        parts = urlsplit("//" + header)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        return None
    if (not parts.hostname or parts.username is not None or parts.password is not None
            or parts.path or parts.query or parts.fragment):
        return None
    return parts.hostname.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Guard:
    names: frozenset[str]  # host names a request may carry in Host
    any_ip: bool  # bound to every address: any IP literal names this machine
    token: str | None = field(repr=False)  # a secret: never in a repr or log line
    port: int

    @classmethod
    def for_bind(cls, host: str, port: int, allowed_hosts: str, token: str | None) -> Guard:
        extra = {h.strip().lower().rstrip(".") for h in allowed_hosts.split(",") if h.strip()}
        bound = host.strip("[]").lower()
        names = LOCAL_NAMES | extra | ({bound} - WILDCARDS)
        return cls(frozenset(names), bound in WILDCARDS, token or None, port)

    @property
    def cookie_name(self) -> str:
        # cookies are shared by every port of a host: one name per port keeps two servers apart
        return f"cliffwatch_token_{self.port}"

    def cookie_value(self) -> str:
        # what the browser keeps is derived from the token, never the token itself
        return hmac.new(self.token.encode(), b"cliffwatch page cookie", hashlib.sha256).hexdigest()

    def host_allowed(self, header: str | None) -> bool:
        # An IP literal cannot be rebound: only a name the attacker owns can point here.
        name = host_name(header) if header else None
        return name is not None and (name in self.names or (self.any_ip and _is_ip(name)))

    def origin_allowed(self, origin: str | None, host: str) -> bool:
        """No Origin (a program), or this server's own pages."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()

    def token_ok(self, headers: dict[str, str]) -> bool:
        if self.token is None:
            return True
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(given.strip(), self.token):
            return True
        return _same(_cookie(headers.get("cookie", ""), self.cookie_name), self.cookie_value())


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _cookie(header: str, name: str) -> str | None:
    try:
        morsel = SimpleCookie(header).get(name)
    except CookieError:
        return None
    return morsel.value if morsel else None


class GuardMiddleware:
    """Pure ASGI middleware in front of Streamlit and /api: HTTP and websocket alike."""

    def __init__(self, app, guard: Guard):
        self.app = app
        self.guard = guard

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is None:
            return await self.app(scope, receive, send)
        status, message = refusal
        if scope["type"] == "websocket":
            # closing before accepting makes the server answer the upgrade with 403
            await receive()
            return await send({"type": "websocket.close", "code": 1008})
        if status == 401 and self._token_in_address(scope):
            return await self._welcome(scope, send)
        return await _reply(send, scope["path"], status, message)

    def refusal(self, scope) -> tuple[int, str] | None:
        headers, hosts = _headers(scope)
        host = headers.get("host")
        if hosts != 1 or not self.guard.host_allowed(host):
            return 403, (f"this server does not answer for Host {host!r}; open it by its own "
                         "address, or start it with --allowed-hosts NAME (env "
                         "CLIFFWATCH_ALLOWED_HOSTS)")
        if not self.guard.origin_allowed(headers.get("origin"), host):
            return 403, (f"requests from pages of {headers['origin']!r} are refused; use this "
                         "server's own page, or call it from a program (no Origin header)")
        if not self.guard.token_ok(headers):
            return 401, ("this server needs its token: open the URL printed at start-up "
                         "(it ends in ?token=...), or send 'Authorization: Bearer TOKEN' "
                         "(the CLI sends CLIFFWATCH_TOKEN)")
        return None

    def _token_in_address(self, scope) -> bool:
        if scope.get("method") not in ("GET", "HEAD") or scope["path"].startswith("/api/"):
            return False
        given = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token")
        return _same(given, self.guard.token)

    async def _welcome(self, scope, send) -> None:
        """The first visit with ?token=: set the cookie and reload without the token, so it
        stays out of the address bar and history."""
        query = [(k, v) for k, v in parse_qsl(scope["query_string"].decode("latin-1"))
                 if k != "token"]
        location = scope["path"] + (f"?{urlencode(query)}" if query else "")
        cookie = (f"{self.guard.cookie_name}={self.guard.cookie_value()}; Path=/; HttpOnly; "
                  "SameSite=Strict")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode("latin-1")),
                                (b"set-cookie", cookie.encode("latin-1")),
                                (b"cache-control", b"no-store"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def _headers(scope) -> tuple[dict[str, str], int]:
    """The first value of each header, and how many Host headers came (one is right)."""
    headers: dict[str, str] = {}
    hosts = 0
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        hosts += name == "host"
        headers.setdefault(name, raw_value.decode("latin-1"))
    return headers, hosts


async def _reply(send, path: str, status: int, message: str) -> None:
    # /api answers JSON like every API error; a browser on the page gets plain text
    if path.startswith("/api/"):
        body, kind = orjson.dumps({"error": message}), b"application/json"
    else:
        body, kind = f"cliffwatch: {message}\n".encode(), b"text/plain; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
