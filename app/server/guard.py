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
(``/?token=TOKEN``), which starts a session: an HttpOnly, SameSite=Strict cookie holding a
random id this process keeps in memory. Browsers send a host's cookies to every port of it,
so the session opens only the page (GET and HEAD of Streamlit's paths) and its websocket,
never /api or /metrics; it ends after ``session_hours``, at ``/_cliffwatch/logout`` and when
the server stops::

    GET /?token=TOKEN           -> 303 to /, Set-Cookie: cliffwatch_session_8501=<random id>
    GET /run?run=a  (cookie)    -> the page;  websocket /_stcore/stream (cookie) -> 101
    POST /api/sql   (cookie)    -> 401: /api takes the bearer token only

Every answer forbids framing (``frame-ancestors 'self'``, ``X-Frame-Options: DENY``), and a
request to show a page inside another origin's frame is refused before it is answered.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qsl, urlencode, urlsplit

import orjson

from ..errors import CliffwatchError

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
LOGOUT = "/_cliffwatch/logout"
# the paths a browser session never opens: the first part of the path, any case
BEARER_ONLY = frozenset({"api", "metrics"})
MAX_SESSION_HOURS = 720.0
# no page of this server is shown in a frame; Chromium obeys the CSP, older browsers XFO
FRAME_HEADERS = [(b"content-security-policy", b"frame-ancestors 'self'"),
                 (b"x-frame-options", b"DENY")]
FRAMES = frozenset({"iframe", "frame", "embed", "object", "fencedframe"})


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


class Sessions:
    """This process's browser sign-ins: a random id per ``?token=`` visit, with the monotonic
    time it ends. Kept in memory only, so every session ends with the server; only a hash of
    each id is kept, and at most MAX of them (the oldest sign-in goes first)."""

    MAX = 1000

    def __init__(self, lifetime_s: float):
        self.lifetime_s = lifetime_s
        self._ends: dict[bytes, float] = {}

    def open(self) -> str:
        now = time.monotonic()
        self._ends = {k: end for k, end in self._ends.items() if end > now}
        while len(self._ends) >= self.MAX:
            del self._ends[next(iter(self._ends))]
        sid = secrets.token_urlsafe(32)
        self._ends[_key(sid)] = now + self.lifetime_s
        return sid

    def valid(self, sid: str | None) -> bool:
        if not sid:
            return False
        end = self._ends.get(_key(sid))
        if end is not None and end <= time.monotonic():
            self.end(sid)
            return False
        return end is not None

    def end(self, sid: str | None) -> None:
        if sid:
            self._ends.pop(_key(sid), None)


def _key(sid: str) -> bytes:
    return hashlib.sha256(sid.encode("latin-1", "replace")).digest()


@dataclass(frozen=True)
class Guard:
    names: frozenset[str]  # host names a request may carry in Host
    any_ip: bool  # bound to every address: any IP literal names this machine
    token: str | None = field(repr=False)  # a secret: never in a repr or log line
    port: int
    sessions: Sessions = field(default_factory=lambda: Sessions(12 * 3600.0), repr=False,
                               compare=False)

    @classmethod
    def for_bind(cls, host: str, port: int, allowed_hosts: str, token: str | None,
                 session_hours: float = 12.0) -> Guard:
        if not 0 < session_hours <= MAX_SESSION_HOURS:
            raise CliffwatchError(f"--session-hours must be more than 0 and at most "
                                  f"{MAX_SESSION_HOURS:g} (30 days), not {session_hours:g}")
        extra = {h.strip().lower().rstrip(".") for h in allowed_hosts.split(",") if h.strip()}
        bound = host.strip("[]").lower()
        names = LOCAL_NAMES | extra | ({bound} - WILDCARDS)
        return cls(frozenset(names), bound in WILDCARDS, token or None, port,
                   Sessions(session_hours * 3600.0))

    @property
    def cookie_name(self) -> str:
        # cookies are shared by every port of a host: one name per port keeps two servers apart
        return f"cliffwatch_session_{self.port}"

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

    def bearer_ok(self, headers: dict[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and _same(given.strip(), self.token)

    def session(self, headers: dict[str, str]) -> str | None:
        """The session id the request's cookie names, whether or not it is still valid."""
        return _cookie(headers.get("cookie", ""), self.cookie_name)


def opens_with_session(scope) -> bool:
    """What a browser session may open: the page's own reads and its websocket, never /api
    or /metrics (which want the bearer token) and never a write."""
    first = scope["path"].lstrip("/").split("/", 1)[0].lower()
    if first in BEARER_ONLY:
        return False
    return scope["type"] == "websocket" or scope.get("method") in ("GET", "HEAD")


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
        if scope["type"] == "http":
            send = _unframeable(send)
        headers, hosts = _headers(scope)
        refusal = self.refusal(scope, headers, hosts)
        if refusal is None and scope["type"] == "http" and scope["path"] == LOGOUT:
            return await self._logout(headers, send)
        if refusal is None and self._token_in_address(scope):
            return await self._welcome(scope, send)
        if refusal is None:
            refusal, session = self.signed_in(scope, headers)
        if refusal is None:
            if session and scope["type"] == "websocket":
                receive, send = _Ending(self.guard.sessions, session, receive, send).pair()
            return await self.app(scope, receive, send)
        status, message = refusal
        if scope["type"] == "websocket":
            # closing before accepting makes the server answer the upgrade with 403
            await receive()
            return await send({"type": "websocket.close", "code": 1008})
        return await _reply(send, scope["path"], status, message)

    def refusal(self, scope, headers: dict[str, str], hosts: int) -> tuple[int, str] | None:
        host = headers.get("host")
        if hosts != 1 or not self.guard.host_allowed(host):
            return 403, (f"this server does not answer for Host {host!r}; open it by its own "
                         "address, or start it with --allowed-hosts NAME (env "
                         "CLIFFWATCH_ALLOWED_HOSTS)")
        if not self.guard.origin_allowed(headers.get("origin"), host):
            return 403, (f"requests from pages of {headers['origin']!r} are refused; use this "
                         "server's own page, or call it from a program (no Origin header)")
        if (headers.get("sec-fetch-dest") in FRAMES
                and headers.get("sec-fetch-site", "same-origin") != "same-origin"):
            # another page framing the dashboard could have its forms clicked unseen
            return 403, ("this dashboard is not shown inside another site's page; open it in "
                         "a tab of its own")
        return None

    def signed_in(self, scope, headers: dict[str, str]) -> tuple[tuple | None, str | None]:
        """(None, session id or None) when the request may go on, else (refusal, None)."""
        if self.guard.token is None or self.guard.bearer_ok(headers):
            return None, None
        session = self.guard.session(headers)
        if opens_with_session(scope):
            if self.guard.sessions.valid(session):
                return None, session
            if session:
                return (401, "this server needs its token: your sign-in ended (after "
                        "--session-hours, at sign-out, or when the server restarted); open "
                        "the URL printed at start-up (it ends in ?token=...) again"), None
        elif session:
            return (401, "this server needs its token: /api and /metrics take only "
                    "'Authorization: Bearer TOKEN' (the CLI sends CLIFFWATCH_TOKEN); the "
                    "browser's sign-in opens the dashboard alone"), None
        return (401, "this server needs its token: open the URL printed at start-up (it ends "
                "in ?token=...), or send 'Authorization: Bearer TOKEN' (the CLI sends "
                "CLIFFWATCH_TOKEN)"), None

    def _token_in_address(self, scope) -> bool:
        if (self.guard.token is None or scope["type"] != "http"
                or not opens_with_session(scope)):
            return False
        given = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token")
        return _same(given, self.guard.token)

    async def _welcome(self, scope, send) -> None:
        """A visit with ?token=: start a session and reload without the token, so it stays
        out of the address bar and history."""
        query = [(k, v) for k, v in parse_qsl(scope["query_string"].decode("latin-1"))
                 if k != "token"]
        # one leading slash: "//evil.example/?token=..." must not redirect to another host
        location = "/" + scope["path"].lstrip("/") + (f"?{urlencode(query)}" if query else "")
        sid = self.guard.sessions.open()
        cookie = (f"{self.guard.cookie_name}={sid}; Path=/; HttpOnly; SameSite=Strict; "
                  f"Max-Age={int(self.guard.sessions.lifetime_s)}")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode("latin-1")),
                                (b"set-cookie", cookie.encode("latin-1")),
                                (b"cache-control", b"no-store"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    async def _logout(self, headers: dict[str, str], send) -> None:
        self.guard.sessions.end(self.guard.session(headers))
        body = (b"cliffwatch: signed out; open the URL printed at start-up (it ends in "
                b"?token=...) to sign in again\n" if self.guard.token else
                b"cliffwatch: nothing to sign out of: this server needs no token\n")
        cookie = f"{self.guard.cookie_name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"set-cookie", cookie.encode("latin-1")),
                                (b"cache-control", b"no-store"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _Ending:
    """A session's websocket, closed at the first message after its session ended (expired
    or signed out): an open page must not outlive its sign-in."""

    def __init__(self, sessions: Sessions, session: str, receive, send):
        self.sessions, self.session = sessions, session
        self._receive, self._send = receive, send
        self.closed = False

    def pair(self):
        return self.receive, self.send

    async def receive(self):
        message = await self._receive()
        if message["type"] == "websocket.receive" and not self.sessions.valid(self.session):
            if not self.closed:
                self.closed = True
                await self._send({"type": "websocket.close", "code": 1008})
            return {"type": "websocket.disconnect", "code": 1008}
        return message

    async def send(self, message) -> None:
        if not self.closed:  # Streamlit's own close after ours would be an error
            await self._send(message)


def _unframeable(send):
    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *FRAME_HEADERS]}
        await send(message)

    return sending


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
