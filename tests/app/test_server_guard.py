"""The server answers only its own pages (issue 7, section 2), through the real server.

- a Host that is not the server's (DNS rebinding) gets 403 on /api/* and on Streamlit's own
  paths, its websocket included;
- an Origin that is not the server's own gets 403;
- off loopback a token is required (bearer on /api/*, a session cookie for the page after one
  visit with ?token=), generated and printed when none is given, and never written to
  server.json;
- the CLI sends CLIFFWATCH_TOKEN, and only to a server.json that this user wrote and that
  names this machine;
- `docker build .` builds the monitor, whose CMD serves.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from app.serverfile import is_local_url
from tests.conftest import ROOT, Server, free_port, run_cli, stop_process

MARK = 0.123456789  # a metric value that must never leak to a refused request
EVIL = "evil.example"


def write_run(logdir: Path) -> None:
    (logdir / "r").mkdir(parents=True)
    (logdir / "r" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": MARK}) + "\n" for s in range(1, 4)))


@pytest.fixture(scope="module")
def local_server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("guard") / "logs"
    write_run(logdir)
    server = Server(logdir, "--allowed-hosts", "Monitor.LAN")
    yield server
    server.stop()


def host(name: str, server) -> dict[str, str]:
    return {"Host": f"{name}:{server.port}"}


REQUESTS = [("GET", "/api/health", None), ("GET", "/api/runs", None),
            ("POST", "/api/sql", {"sql": "SELECT loss FROM metrics"}),
            ("GET", "/api/query/runs", None), ("GET", "/", None), ("GET", "/_stcore/health", None),
            ("GET", "/_stcore/host-config", None)]


def send(server, method: str, path: str, body, headers: dict) -> httpx.Response:
    return httpx.request(method, server.url + path, json=body, headers=headers, timeout=30)


def test_foreign_host_gets_403_on_api_and_page(local_server):
    for method, path, body in REQUESTS:
        for name in (EVIL, "127.0.0.1.evil.example", "localhost.evil.example"):
            refused = send(local_server, method, path, body, host(name, local_server))
            assert refused.status_code == 403, (name, path)
            assert str(MARK) not in refused.text
        refused = send(local_server, method, path, body, {"Host": "127.0.0.1@evil.example"})
        assert refused.status_code == 403
        for name in ("127.0.0.1", "localhost", "monitor.lan"):
            assert send(local_server, method, path, body,
                        host(name, local_server)).status_code == 200, (name, path)
    rows = send(local_server, "POST", "/api/sql", {"sql": "SELECT loss FROM metrics"}, {})
    assert rows.json()["rows"][0] == [MARK]


def test_foreign_origin_gets_403(local_server):
    body = {"sql": "SELECT loss FROM metrics"}
    port = local_server.port
    own = f"http://127.0.0.1:{port}"
    for origin in (f"http://{EVIL}:{port}", "null", f"http://127.0.0.1:{port + 1}",
                   f"ftp://127.0.0.1:{port}"):
        refused = send(local_server, "POST", "/api/sql", body, {"Origin": origin})
        assert refused.status_code == 403, origin
        assert str(MARK) not in refused.text
    assert send(local_server, "POST", "/api/sql", body, {"Origin": own}).status_code == 200


def upgrade(port: int, headers: dict[str, str]) -> str:
    """A hand-made websocket upgrade of Streamlit's /_stcore/stream; the status line back."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET /_stcore/stream HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
             *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]


def test_websocket_with_foreign_host_or_origin_is_refused(local_server):
    port = local_server.port
    own = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
    assert " 403 " in upgrade(port, {**own, "Host": f"{EVIL}:{port}"})
    assert " 403 " in upgrade(port, {**own, "Host": f"{EVIL}:{port}",
                                     "Origin": f"http://{EVIL}:{port}"})
    assert " 403 " in upgrade(port, {**own, "Origin": f"http://{EVIL}:{port}"})
    assert " 101 " in upgrade(port, own)


class TokenServer:
    """`serve --host 0.0.0.0` (the Docker image's bind), with or without CLIFFWATCH_TOKEN."""

    def __init__(self, logdir: Path, token: str | None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logdir = logdir
        self.log_path = logdir.parent / f"server-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if k != "CLIFFWATCH_TOKEN"}
        if token:
            env["CLIFFWATCH_TOKEN"] = token
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--logdir", str(logdir), "--port",
                 str(self.port), "--host", "0.0.0.0"], cwd=ROOT, stdout=log,
                stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"})
        self.token = token or self._printed_token()
        self._wait()

    def log(self) -> str:
        return self.log_path.read_text()

    def _printed_token(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"dashboard and API at (\S+)/\?token=(\S+)", self.log())
            if found:
                assert found.group(1) == self.url
                return found.group(2)
            assert self.proc.poll() is None, self.log()
            time.sleep(0.1)
        raise AssertionError("no URL with a token printed: " + self.log())

    def _wait(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log()
            try:
                if httpx.get(self.url + "/api/health", headers=self.bearer(),
                             timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("server did not start: " + self.log())

    def bearer(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token}"}

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def token_server(tmp_path):
    servers = []

    def start(token: str | None) -> TokenServer:
        logdir = tmp_path / "logs"
        write_run(logdir)
        servers.append(TokenServer(logdir, token))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_off_loopback_api_needs_the_bearer_token(token_server):
    server = token_server("s3cret-token-for-the-test")
    for method, path, body in REQUESTS:
        for headers in ({}, server.bearer("wrong"), {"Authorization": server.token}):
            refused = httpx.request(method, server.url + path, json=body, headers=headers,
                                    timeout=30)
            assert refused.status_code == 401, (path, headers)
            assert str(MARK) not in refused.text
        assert httpx.request(method, server.url + path, json=body, headers=server.bearer(),
                             timeout=30).status_code == 200, path
    # the token never lands on disk or in the log, not even in the settings line
    assert server.token not in (server.logdir / ".cliffwatch" / "server.json").read_text()
    assert server.token not in server.log() and "token=(set)" in server.log()
    # the CLI reads CLIFFWATCH_TOKEN; without it, it says what to set
    env = {k: v for k, v in os.environ.items() if k != "CLIFFWATCH_TOKEN"}
    missing = run_cli("sql", "SELECT loss FROM metrics", "--logdir", str(server.logdir),
                      env=env)
    assert missing.returncode == 2 and "CLIFFWATCH_TOKEN" in missing.stderr
    assert "Traceback" not in missing.stderr
    found = run_cli("sql", "SELECT loss FROM metrics LIMIT 1", "--logdir", str(server.logdir),
                    "--format", "csv", env={**env, "CLIFFWATCH_TOKEN": server.token})
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == ["loss", str(MARK)]
    diagnosed = run_cli("diagnose", str(server.logdir / "r"), "--json",
                        env={**env, "CLIFFWATCH_TOKEN": server.token})
    assert diagnosed.returncode == 0 and json.loads(diagnosed.stdout) == [], diagnosed.stderr
    refused = run_cli("diagnose", str(server.logdir / "r"), "--json", env=env)
    assert refused.returncode == 2 and "CLIFFWATCH_TOKEN" in refused.stderr  # asked the server


def test_generated_token_is_printed_once_and_the_page_keeps_working(token_server):
    server = token_server(None)
    assert len(server.token) >= 32
    assert server.token not in (server.logdir / ".cliffwatch" / "server.json").read_text()
    assert httpx.get(server.url + "/api/health", timeout=10).status_code == 401
    assert httpx.get(server.url + "/", timeout=10).status_code == 401
    assert " 403 " in upgrade(server.port, {"Host": f"127.0.0.1:{server.port}"})
    # the first visit with the token sets the cookie and reloads without the token
    first = httpx.get(f"{server.url}/?token={server.token}", timeout=10)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and server.token not in cookie
    pair = cookie.split(";", 1)[0]
    later = httpx.get(server.url + "/", headers={"Cookie": pair}, timeout=10)
    assert later.status_code == 200 and "<html" in later.text.lower()
    # the page's session is no key to the API (tests/app/test_guard_session.py)
    assert httpx.get(server.url + "/api/runs", headers={"Cookie": pair}).status_code == 401
    assert " 101 " in upgrade(server.port, {"Host": f"127.0.0.1:{server.port}", "Cookie": pair,
                                            "Origin": server.url})
    assert httpx.get(f"{server.url}/?token=wrong", timeout=10).status_code == 401


def test_page_works_in_a_browser_after_the_token_visit(token_server, browser):
    server = token_server(None)
    page = browser.new_page()
    page.goto(f"{server.url}/?token={server.token}")
    assert "token" not in page.url
    page.get_by_text(re.compile(r"^1 run\(s\) in ")).first.wait_for(timeout=30_000)
    page.goto(f"{server.url}/run?run=r")  # the cookie, not the URL, carries the token now
    caption = page.get_by_text(re.compile(r"^\d+ lines, last step")).first
    caption.wait_for(timeout=30_000)
    assert caption.inner_text().startswith("3 lines, last step 3")
    page.reload()
    page.get_by_text(re.compile(r"^3 lines, last step 3")).first.wait_for(timeout=30_000)
    stranger = browser.new_context().new_page()
    stranger.goto(server.url)
    assert "needs its token" in stranger.content()


class Receiver:
    """An HTTP listener that records every request: where the CLI must not go."""

    def __init__(self, address: str):
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append((self.path, self.headers.get("Authorization")))
                self.send_response(200)
                self.end_headers()

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer((address, 0), Handler)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.mark.parametrize("case", ["group-writable", "named-host", "killed-server",
                                  "pid-not-listening"])
def test_cli_ignores_a_server_json_it_cannot_trust(tmp_path, case):
    """A planted or edited server.json, or one a killed server left behind while something
    else now listens on its port, gets neither the query nor the token."""
    receiver = Receiver("127.0.0.1")
    info = tmp_path / "logs" / ".cliffwatch" / "server.json"
    info.parent.mkdir(parents=True)
    name = "127.0.0.1" if case != "named-host" else socket.gethostname()
    if case == "named-host" and not is_local_address(name):
        pytest.skip(f"{name} does not resolve to 127.0.0.1 here")
    bystander = subprocess.Popen(["sleep", "30"])
    if case == "killed-server":
        bystander.kill()
        bystander.wait()
    pid = bystander.pid if case in ("killed-server", "pid-not-listening") else os.getpid()
    info.write_text(json.dumps({"pid": pid, "url": f"http://{name}:{receiver.port}",
                                "logdir": str(tmp_path / "logs")}))
    info.chmod(0o666 if case == "group-writable" else 0o644)
    try:
        done = run_cli("sql", "SELECT 1", "--logdir", str(tmp_path / "logs"),
                       env={**os.environ, "CLIFFWATCH_TOKEN": "do-not-send"})
    finally:
        receiver.http.shutdown()
        bystander.kill()
        bystander.wait()
    assert receiver.seen == []
    assert done.returncode == 2 and "ignoring" in done.stderr and "Traceback" not in done.stderr


def is_local_address(name: str) -> bool:
    try:
        return socket.gethostbyname(name) == "127.0.0.1"
    except OSError:
        return False


def test_only_this_machine_is_a_local_url():
    assert is_local_url("http://127.0.0.1:8501") and is_local_url("http://localhost:1")
    assert is_local_url("http://[::1]:8501") or not socket.has_ipv6
    assert not is_local_url("http://192.0.2.77:8501")  # TEST-NET, not ours
    assert not is_local_url("http://example.com:8501")
    assert not is_local_url("https://127.0.0.1:8501") and not is_local_url("file:///etc")


def dockerfile_stages(name: str = "Dockerfile") -> list[tuple[str, list[str]]]:
    """(stage name, its instructions) in file order."""
    stages: list[tuple[str, list[str]]] = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.strip()
        if line.upper().startswith("FROM "):
            words = line.split()
            stages.append((words[-1] if words[-2].upper() == "AS" else words[1], []))
        elif line and not line.startswith("#") and stages:
            stages[-1][1].append(line)
    return stages


def test_docker_build_without_target_builds_the_monitor():
    name, instructions = dockerfile_stages()[-1]  # what `docker build .` builds
    assert name == "monitor"
    cmd = json.loads([i for i in instructions if i.startswith("CMD ")][-1][4:])
    assert cmd[:4] == ["python", "-m", "app", "serve"] and "0.0.0.0" in cmd
    readme = (ROOT / "README.md").read_text()
    for command in re.findall(r"docker build[^`\n&]*", readme):
        assert "--target" not in command or "--target monitor" in command, command


def test_the_monitor_image_needs_no_cuda_base():
    """Debian's docker.io builds with the classic builder, which builds every stage of a file
    before the target: a CUDA stage in the monitor's file stopped `--target monitor` wherever
    the CUDA base cannot be had. The trainer's image is a file of its own."""
    assert [name for name, _ in dockerfile_stages()] == ["monitor"]
    froms = [line for line in (ROOT / "Dockerfile").read_text().splitlines()
             if line.upper().startswith(("FROM ", "ARG "))]
    assert not any("cuda" in line.lower() for line in froms), froms
    gpu = dockerfile_stages("Dockerfile.gpu")
    assert [name for name, _ in gpu] == ["gpu"]
    assert "nvidia/cuda" in (ROOT / "Dockerfile.gpu").read_text()
