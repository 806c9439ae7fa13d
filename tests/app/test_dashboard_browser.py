"""The dashboard in headless Chromium: a run's loss chart grows while `replay` writes it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("no /usr/bin/chromium here (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


def lines_shown(page) -> int:
    caption = page.get_by_text(re.compile(r"^\d+ lines, last step")).first
    caption.wait_for(timeout=30_000)
    return int(caption.inner_text().split()[0])


def test_loss_chart_grows_while_replay_writes(tmp_path, make_server, browser):
    logdir = tmp_path / "logs"
    logdir.mkdir()
    server = make_server(logdir)
    writer = subprocess.Popen([sys.executable, "-m", "app", "replay", str(SAMPLES / "seed-cliff"),
                               "--to", str(logdir / "live"), "--speed", "200"], cwd=ROOT)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(server.url)
        first = lines_shown(page)
        page.locator("[data-testid=stVegaLiteChart]").first.wait_for(timeout=30_000)
        assert page.get_by_text("loss", exact=True).count() >= 1
        page.wait_for_function(
            "n => [...document.querySelectorAll('p')].some(p => /^\\d+ lines/.test(p.innerText)"
            " && parseInt(p.innerText) > n)", arg=first, timeout=30_000)
        assert lines_shown(page) > first
    finally:
        writer.terminate()
        writer.wait()
