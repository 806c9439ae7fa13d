"""A real HTTP webhook receiver on 127.0.0.1 for tests and bench/: it answers each request as
scripted and records what arrived::

    with Receiver() as hook:                          # answers 200 "ok" unless told otherwise
        hook.script(Reply(500), Reply(429, retry_after=2), HANG)  # the next three requests
        hook.phases((8, Reply(500)), (6, HANG))       # by time since this call, then 200
        hook.refuse(); hook.listen()                  # stop listening (connection refused)
        hook.records  # [Record(time, path, headers, body, status)] in arrival order
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: str = "ok"
    retry_after: float | str | None = None
    hang_s: float = 0.0  # wait this long before answering (past the client's timeout)


HANG = Reply(200, hang_s=30.0)  # answers (too late) only if the client is still there


@dataclass
class Record:
    time: float  # time.time() when the whole request had arrived
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered (or meant to, for a hang)
    hung: bool = False

    @property
    def key(self) -> str | None:
        return self.headers.get("idempotency-key")

    def json(self):
        return json.loads(self.body)


@dataclass
class _Script:
    queue: list[Reply] = field(default_factory=list)
    phases: list[tuple[float, Reply]] = field(default_factory=list)  # (ends at, reply)
    default: Reply = field(default_factory=Reply)

    def next(self, now: float) -> Reply:
        if self.queue:
            return self.queue.pop(0)
        for ends, reply in self.phases:
            if now < ends:
                return reply
        return self.default


class Receiver:
    def __init__(self, path: str = "/hook"):
        self.path = path
        self.records: list[Record] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self._script = _Script()
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.server: ThreadingHTTPServer | None = None
        self.listen()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    # -- scripting ---------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these, in order."""
        with self.lock:
            self._script.queue.extend(replies)

    def phases(self, *phases: tuple[float, Reply], then: Reply | None = None) -> None:
        """Answer by time: each (seconds, reply) for that long from now, then ``then``."""
        start = time.monotonic()
        ends, timed = start, []
        for seconds, reply in phases:
            ends += seconds
            timed.append((ends, reply))
        with self.lock:
            self._script.phases = timed
            self._script.default = then or Reply()

    def answer_always(self, reply: Reply) -> None:
        with self.lock:
            self._script = _Script(default=reply)

    # -- listening ---------------------------------------------------------------------------
    def listen(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                receiver._handle(self)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True,
                         name="webhook-receiver").start()

    def refuse(self) -> None:
        """Stop listening: new connections are refused until listen()."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def close(self) -> None:
        self.closing.set()
        self.refuse()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- answering ---------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length)
        with self.lock:
            reply = self._script.next(time.monotonic())
            record = Record(time.time(), handler.path,
                            {k.lower(): v for k, v in handler.headers.items()}, body,
                            reply.status, hung=reply.hang_s > 0)
            self.records.append(record)
        handler.close_connection = True
        if reply.hang_s and self.closing.wait(reply.hang_s):
            return
        payload = reply.body.encode()
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", "text/plain")
            handler.send_header("Content-Length", str(len(payload)))
            # one request per connection, so refuse() refuses the very next request
            handler.send_header("Connection", "close")
            if reply.retry_after is not None:
                handler.send_header("Retry-After", str(reply.retry_after))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:
            pass  # the client gave up (timeout) before the answer

    # -- reading -----------------------------------------------------------------------------
    def snapshot(self) -> list[Record]:
        with self.lock:
            return list(self.records)

    def delivered(self) -> list[Record]:
        """Requests answered 2xx (without hanging), in arrival order."""
        return [r for r in self.snapshot() if 200 <= r.status < 300 and not r.hung]
