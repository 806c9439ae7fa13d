"""No page of the dashboard runs inside another page, and the SQL page runs a query from its
URL only once Run is pressed, in an ad-hoc slot like /api/sql (issue 18, finding 8).

Any web page could frame the dashboard on loopback (no X-Frame-Options, no frame-ancestors)
and have the Alerts page's forms clicked through a transparent frame; ``/sql?q=`` ran the query
in its URL at once, outside the ad-hoc slots. Through the real server and headless Chromium,
and the SQL page through AppTest on a real database.
"""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import streamlit as st
from playwright.sync_api import expect

from app import state
from app.settings import Settings
from tests.app.test_dashboard_pages import SEED, page, press_run, serve_in_process, texts
from tests.app.test_server_guard import write_run
from tests.conftest import SAMPLES, Server

FRAMED = "[data-testid=stApp]"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("frames") / "logs"
    write_run(logdir)
    server = Server(logdir)
    yield server
    server.stop()


def test_every_answer_forbids_framing(server):
    answers = [httpx.get(server.url + path, timeout=10)
               for path in ("/", "/alerts", "/sql?q=SELECT+1", "/_stcore/health",
                            "/api/health", "/metrics", "/api/nowhere")]
    answers.append(httpx.get(server.url + "/", headers={"Host": "evil.example"}, timeout=10))
    for answer in answers:
        assert answer.headers["content-security-policy"] == "frame-ancestors 'self'"
        assert answer.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize(("dest", "site", "status"), [
    ("iframe", "cross-site", 403), ("iframe", "same-site", 403),  # another port is same-site
    ("frame", "cross-site", 403), ("object", "cross-site", 403), ("embed", "same-site", 403),
    ("iframe", "same-origin", 200),
    ("document", "cross-site", 200),  # a link from a chat message opens the page in a tab
])
def test_a_request_to_frame_the_page_from_elsewhere_is_refused(server, dest, site, status):
    answer = httpx.get(server.url + "/alerts", timeout=10,
                       headers={"Sec-Fetch-Dest": dest, "Sec-Fetch-Site": site})
    assert answer.status_code == status
    if status == 403:
        assert "tab of its own" in answer.text


class Hostile:
    """A page on another loopback port that frames the dashboard's Alerts page."""

    def __init__(self, target: str):
        html = (f'<html><body><iframe id="f" src="{target}/alerts" width="900" height="600">'
                "</iframe></body></html>").encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(html)))
                self.end_headers()
                self.wfile.write(html)

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_a_page_on_another_port_cannot_frame_the_dashboard(server, browser):
    hostile = Hostile(server.url)
    tab = browser.new_page()
    seen = []
    tab.on("response", lambda r: seen.append((r.url, r.status))
           if r.url.startswith(server.url) else None)
    try:
        tab.goto(hostile.url, wait_until="load")
        assert (f"{server.url}/alerts", 403) in seen
        frame = next(f for f in tab.frames if f is not tab.main_frame)
        assert frame.locator(FRAMED).count() == 0
        assert not any(url.startswith(f"{server.url}/static") for url, _ in seen)
        # the same page in a tab of its own is the dashboard
        tab.goto(f"{server.url}/alerts")
        tab.get_by_role("heading", name="Alerts", exact=True).wait_for(timeout=30_000)
    finally:
        tab.close()
        hostile.close()


def test_a_query_in_a_link_waits_for_run_to_be_pressed(server, browser):
    tab = browser.new_page()
    try:
        tab.goto(f"{server.url}/sql?q=SELECT+42+AS+answer")
        tab.get_by_text("Press Run to run this query.").wait_for(timeout=30_000)
        # the box is filled by the front end after the page's text: wait for its value
        expect(tab.get_by_role("textbox", name="query")).to_have_value("SELECT 42 AS answer",
                                                                       timeout=30_000)
        assert tab.locator("[data-testid=stMetricValue]").count() == 0
        tab.get_by_role("button", name="Run").click()
        tab.locator("[data-testid=stMetricValue]").get_by_text("42").wait_for(timeout=30_000)
    finally:
        tab.close()


@pytest.fixture
def slow_slots(tmp_path):
    """The seed served in-process with a short --sql-time-limit: how long the page waits."""
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / SEED, logs / SEED)
    monitor = serve_in_process(logs, Settings(sql_time_limit=0.5))
    yield state.current().adhoc_slots
    state.set_current(None)
    st.cache_data.clear()
    monitor.close()


def test_the_sql_page_takes_an_adhoc_slot_and_says_when_none_is_free(slow_slots):
    held = [slow_slots.take(wait_s=0) for _ in range(state.ADHOC_SLOTS)]
    assert all(held)  # /api/sql's queries hold every slot
    try:
        at = press_run(page("views/sql.py", q="SELECT count(*) FROM metrics"))
        assert "already running" in texts(at.warning) and "press Run again" in texts(at.warning)
        assert not at.metric
    finally:
        for _ in held:
            slow_slots.release()
    press_run(at)
    assert at.metric[0].value == "2230" and not at.warning
    assert slow_slots.free() == state.ADHOC_SLOTS  # the page gave its slot back
