"""Off loopback, a browser's sign-in is a session for the page alone (issue 18, finding 7),
through the real server (``serve --host 0.0.0.0``) and headless Chromium.

Browsers send a host's cookies to every port of it, so a listener on another port of the
same host receives the sign-in cookie and can replay it. It used to be an HMAC of the token,
valid forever, on /api/* too: a replayed cookie ran ``POST /api/sql`` and set a 30-day ``*/*``
silence. Now the cookie is a random session id this process keeps in memory: it opens the
page (GET, HEAD) and its websocket, never /api or /metrics; it ends after --session-hours, at
/_cliffwatch/logout, and with the server.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.app.test_server_guard import MARK, TokenServer, upgrade, write_run
from tests.conftest import wait_for

TOKEN = "s3ssion-test-token-0123456789abcdef"
SILENCE = {"rule": "*", "run": "*", "for": "30d", "reason": "replayed cookie"}


def start(logdir, session_hours: str | None = None) -> TokenServer:
    write_run(logdir)
    if session_hours is None:
        return TokenServer(logdir, TOKEN)
    os.environ["CLIFFWATCH_SESSION_HOURS"] = session_hours
    try:
        return TokenServer(logdir, TOKEN)
    finally:
        del os.environ["CLIFFWATCH_SESSION_HOURS"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = start(tmp_path_factory.mktemp("session") / "logs")
    yield server
    server.stop()


def sign_in(server) -> tuple[str, str]:
    """The Cookie header a browser sends after the ?token= visit, and the Set-Cookie line."""
    first = httpx.get(f"{server.url}/?token={TOKEN}", timeout=10)
    assert first.status_code == 303, first.text
    line = first.headers["set-cookie"]
    return line.split(";", 1)[0], line


def test_a_replayed_sign_in_cookie_opens_the_page_but_not_the_api(server):
    pair, line = sign_in(server)
    cookie = {"Cookie": pair}
    # what a listener on another port of this host would send with the browser's cookie
    refused = [
        httpx.post(server.url + "/api/sql", json={"sql": "SELECT loss FROM metrics"},
                   headers=cookie, timeout=10),
        httpx.post(server.url + "/api/alerts/silences", json=SILENCE, headers=cookie,
                   timeout=10),
        httpx.post(server.url + "/api/alerts/test", headers=cookie, timeout=10),
        httpx.get(server.url + "/api/runs", headers=cookie, timeout=10),
        httpx.get(server.url + "/API/health", headers=cookie, timeout=10),
        httpx.get(server.url + "/metrics", headers=cookie, timeout=10),
        # and no write to Streamlit's own paths either (an upload, the agent API)
        httpx.put(server.url + "/_stcore/upload_file/s/f", headers=cookie, timeout=10),
        httpx.post(server.url + "/_stcore/agent/interact", headers=cookie, timeout=10),
    ]
    for answer in refused:
        assert answer.status_code == 401, (answer.request.url, answer.text)
        assert str(MARK) not in answer.text
    assert "Authorization: Bearer" in refused[0].json()["error"]
    bearer = server.bearer()
    assert httpx.post(server.url + "/api/sql", json={"sql": "SELECT loss FROM metrics"},
                      headers=bearer, timeout=10).json()["rows"][0] == [MARK]
    assert httpx.get(server.url + "/metrics", headers=bearer, timeout=10).status_code == 200
    listed = httpx.get(server.url + "/api/alerts", headers=bearer, timeout=10).json()
    assert not any(s.get("reason") == SILENCE["reason"] for s in listed["silences"])
    # what the cookie does open
    for path in ("/", "/run?run=r", "/sql", "/_stcore/health"):
        assert httpx.get(server.url + path, headers=cookie, timeout=10).status_code == 200
    own = {"Host": f"127.0.0.1:{server.port}", "Origin": server.url}
    assert " 101 " in upgrade(server.port, {**own, **cookie})
    assert "HttpOnly" in line and "SameSite=Strict" in line and "Max-Age=43200" in line
    assert pair != sign_in(server)[0]  # a session per sign-in, nothing derived from the token


def test_signing_out_ends_the_session_and_closes_its_open_websocket(server):
    pair, _ = sign_in(server)
    with connect(f"ws://127.0.0.1:{server.port}/_stcore/stream", origin=server.url,
                 additional_headers={"Cookie": pair}, open_timeout=10) as socket:
        out = httpx.get(server.url + "/_cliffwatch/logout", headers={"Cookie": pair},
                        timeout=10)
        assert out.status_code == 200 and "signed out" in out.text
        assert "Max-Age=0" in out.headers["set-cookie"]
        page = httpx.get(server.url + "/", headers={"Cookie": pair}, timeout=10)
        assert page.status_code == 401 and "sign-in ended" in page.text
        assert " 403 " in upgrade(server.port, {"Host": f"127.0.0.1:{server.port}",
                                                "Origin": server.url, "Cookie": pair})
        # the page already open loses its websocket at its next message
        socket.send(b"\x00")
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                socket.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert "Traceback" not in server.log()


def test_a_session_expires_and_belongs_to_the_process_that_made_it(server, tmp_path):
    """A second server with the same token knows nothing of the first one's sessions (the
    old cookie, an HMAC of the token, opened any of them, forever)."""
    short = start(tmp_path / "logs", session_hours="0.002")  # 7.2 s
    try:
        other, _ = sign_in(server)
        replayed = f"{short_cookie(short)}={other.split('=', 1)[1]}"
        assert httpx.get(short.url + "/", headers={"Cookie": replayed},
                         timeout=10).status_code == 401
        pair, line = sign_in(short)
        assert "Max-Age=7;" in line + ";"
        ended = wait_until_refused(short, pair)
        assert "sign-in ended" in ended.text and "--session-hours" in ended.text
    finally:
        short.stop()


def short_cookie(server) -> str:
    return f"cliffwatch_session_{server.port}"


def wait_until_refused(server, pair: str) -> httpx.Response:
    def refused():
        answer = httpx.get(server.url + "/", headers={"Cookie": pair}, timeout=10)
        return answer if answer.status_code == 401 else None

    return wait_for(refused, timeout=60, interval=0.5)


def test_every_page_works_in_a_browser_after_sign_in(server, browser):
    """The pages read the database in-process (app/read) through the websocket: none calls
    /api, so the session is all a browser needs, downloads included."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.goto(f"{server.url}/?token={TOKEN}")
    assert "token" not in page.url
    for path, shown in [("/", "Runs"), ("/run?run=r", "r"), ("/compare", "Compare runs"),
                        ("/incidents", "Incidents"), ("/alerts", "Alerts"), ("/sql", "SQL")]:
        page.goto(server.url + path)
        page.get_by_role("heading", name=shown, exact=True).wait_for(timeout=30_000)
        assert "needs its token" not in page.content(), path
    page.get_by_role("textbox", name="query").fill("SELECT 42 AS answer")
    page.get_by_role("button", name="Run").click()
    page.locator("[data-testid=stMetricValue]").get_by_text("42").wait_for(timeout=30_000)
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name="Download CSV").click()
    assert Path(download.value.path()).read_text().split() == ["answer", "42"]
    # the browser itself, cookie and all, is refused on the API
    assert context.request.post(server.url + "/api/sql",
                                data={"sql": "SELECT 1"}).status == 401
    page.goto(server.url + "/_cliffwatch/logout")
    page.goto(server.url + "/")
    assert re.search("sign-in ended|needs its token", page.content())
    context.close()


@pytest.mark.parametrize("hours", [0, -1, 721, float("inf"), float("nan")])
def test_a_session_length_out_of_range_is_refused_naming_the_flag(hours):
    from app.errors import CliffwatchError
    from app.server.guard import Guard

    with pytest.raises(CliffwatchError, match="--session-hours must be more than 0"):
        Guard.for_bind("0.0.0.0", 8501, "", TOKEN, session_hours=hours)
