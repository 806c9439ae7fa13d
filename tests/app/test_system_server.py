"""system.jsonl through the real server: its tables over /api/sql, the newest sample as
/metrics gauges (per-GPU labels), a stall still told while the sampler writes on, and the
Run page's System panel in headless Chromium, growing live with no new training line."""

from __future__ import annotations

import json
import os
import re
import time

import httpx
import pytest

from tests.app.test_dashboard_browser import CHART, artifacts, chart  # noqa: F401 (fixture)
from tests.app.test_system_ingest import append, line, sample
from tests.conftest import Server, run_cli, wait_for

STEPS = 40
QUIET_S = 600  # how long before the server starts the training lines were last written


def write_run(logs, name: str, *, system: bool) -> None:
    folder = logs / name
    folder.mkdir(parents=True)
    start = time.time() - QUIET_S - 2 * STEPS
    metrics = folder / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "loss": 3 - s / STEPS, "elapsed_s": 2.0 * s,
                                           "time": start + 2 * s}) + "\n"
                               for s in range(1, STEPS + 1)))
    os.utime(metrics, (start + 2 * STEPS, start + 2 * STEPS))  # training stopped then
    if system:
        append(folder / "system.jsonl", *(line(sample(i, i) | {"time": start + 2 * i})
                                          for i in range(1, STEPS + 1)))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    logs = tmp_path_factory.mktemp("system") / "logs"
    write_run(logs, "box", system=True)
    write_run(logs, "plain", system=False)
    server = Server(logs)
    try:
        yield server, logs
    finally:
        server.stop()


def samples(server) -> int:
    return server.sql("SELECT count(*) FROM system_samples").json()["rows"][0][0]


def sampler_writes_on(server, logs, count: int, **values) -> None:
    """The sampler's next lines, stamped now (the training loop wrote nothing since)."""
    before = samples(server)
    now = time.time()
    append(logs / "box" / "system.jsonl", *(line(sample(STEPS + i, STEPS) | {
        "time": now + i * 0.01} | values) for i in range(count)))
    wait_for(lambda: samples(server) == before + count)


def test_the_tables_answer_ad_hoc_sql(served):
    server, logs = served
    found = server.sql("SELECT s.run, count(DISTINCT s.time), count(*), max(g.util_percent), "
                       "max(s.disk_write_bps) FROM system_samples AS s JOIN system_gpus AS g "
                       "USING (run, time) GROUP BY s.run")
    assert found.status_code == 200, found.text
    assert found.json()["rows"] == [["box", STEPS, 2 * STEPS, 91.0, 1048576.0 * STEPS]]
    tables = {row[0] for row in server.sql("SHOW TABLES").json()["rows"]}
    assert {"system_samples", "system_gpus"} <= tables
    # the named starting point, as `sql --query` runs it through the server
    usage = run_cli("sql", "--logdir", str(logs), "--query", "system_usage", "--param",
                    "run=box", "--format", "json")
    assert usage.returncode == 0, usage.stderr
    (row,) = json.loads(usage.stdout)
    assert (row["samples"], row["gpus"], row["gpu_util_min"], row["core_peak"],
            row["disk_write_peak_mb_s"]) == (STEPS, 2, 90.0, 100.0, round(1.048576 * STEPS, 1))


def gauge(text: str, name: str, **labels) -> float | None:
    """The value of one series in a /metrics page, or None if it is not there."""
    for row in text.splitlines():
        match = re.fullmatch(rf"cliffwatch_{name}\{{(.*)\}} (\S+)", row)
        if match and dict(re.findall(r'(\w+)="([^"]*)"', match.group(1))) == labels:
            return float(match.group(2))
    return None


def test_metrics_gives_the_newest_sample_and_still_tells_a_stall(served):
    server, logs = served
    sampler_writes_on(server, logs, 1, cpu_percent=12.5, proc_rss_bytes=3 * 2**30)
    page = httpx.get(server.url + "/metrics", timeout=30).text
    host = {"run": "box", "host": "gpu-box-1"}
    assert gauge(page, "run_system_cpu_percent", **host) == 12.5
    assert gauge(page, "run_system_process_rss_bytes", **host) == 3 * 2**30
    assert gauge(page, "run_system_disk_write_bytes_per_second", **host,
                 disk="nvme0n1") == 1048576.0 * STEPS
    for gpu in ("0", "1"):
        assert gauge(page, "run_gpu_utilization_percent", **host, gpu=gpu) == 90.0 + int(gpu)
        assert gauge(page, "run_gpu_memory_total_bytes", **host, gpu=gpu) == 150323855360
    assert gauge(page, "run_system_cpu_percent", run="plain", host="gpu-box-1") is None
    # the sampler wrote a second ago; the training line QUIET_S before the server started
    assert gauge(page, "run_seconds_since_last_line", run="box") >= QUIET_S
    listed = httpx.get(server.url + "/api/runs", timeout=30).json()
    (box,) = [r for r in listed["runs"] if r["run"] == "box"]
    assert time.time() - box["last_write"] >= QUIET_S  # the Runs page's "no line for"


def test_the_run_page_draws_the_system_panel_live(served, browser, artifacts):  # noqa: F811
    server, logs = served
    page = browser.new_page(viewport={"width": 1400, "height": 3000})
    try:
        page.goto(f"{server.url}/run?run=box&metrics=loss")
        for title in ("system: utilisation %", "system: memory GiB", "system: disk MB/s"):
            chart(page, title).first.wait_for(timeout=30_000)
        use = chart(page, "system: utilisation %").first
        for series in ("CPU, host", "CPU, busiest core", "GPU 0", "GPU 1"):
            use.locator("svg text", has_text=re.compile(rf"^{re.escape(series)}$")).first \
                .wait_for(timeout=10_000)
        # on the loss chart's x: the same axis, the same steps
        x_axes = [chart(page, t).first.locator("[aria-label^='X-axis']").first
                  .get_attribute("aria-label") for t in ("loss", "system: disk MB/s")]
        assert x_axes[0] == x_axes[1] and "step" in x_axes[0], x_axes
        memory = chart(page, "system: memory GiB").first
        swap = memory.locator("svg text", has_text=re.compile(r"^swap used$"))
        assert swap.count() == 0  # no swap used yet: no swap series
        # the sampler goes on through the stall, no training line comes: drawn without reload
        sampler_writes_on(server, logs, 3, swap_used_bytes=2**30)
        swap.first.wait_for(timeout=15_000)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        page.screenshot(path=str(artifacts / "run-page-system-panel.png"), full_page=True)
        page.goto(f"{server.url}/run?run=plain&metrics=loss")
        chart(page, "loss").first.wait_for(timeout=30_000)
        assert page.get_by_text("System", exact=True).count() == 0
        assert page.locator(CHART).filter(has=page.locator(
            "svg text", has_text=re.compile(r"^system: "))).count() == 0
    finally:
        page.close()
