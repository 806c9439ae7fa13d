"""The Run page for a 1,000,000- and a 10,000,000-line run: server-side reads, and the page
in headless Chromium.

Builds each seed-format run (samples/seed-cliff keys, buckets lists included) with DuckDB's
COPY under /dev/shm, ingests it as the server does (Monitor + catch_up), rolls its chart
tiles, then times every read the Run page makes, the way app/dashboard/views/run.py makes
them, one call each: version, metric_names, axes, step_span, series (the default panels'
metrics), gaps, typical_gap, markers and the bucket strip. Each is timed

- cold: the database closed and opened again (a new DuckDB instance: its buffer pool, block
  metadata and object cache empty, as the line printed before the figures shows; the OS page
  cache still holds the file, which lives in tmpfs, and this process's imports and parsed
  query files are warm);
- warm: the same calls again;
- zoom: 1% of the run at full resolution (its middle; read from raw lines, bucketed);

and the payload of the series frames as JSON and as Arrow IPC. Then the real server is
started on the same folder and the Run page opened in Chromium twice (the second time with
Streamlit's own files cached, as in a user's tab): seconds until every panel is drawn, bytes
of page data over the websocket and bytes over HTTP.

    $ .venv/bin/python bench/dashboard.py
    1,000,000 lines: ingest 1.2 s, tiles 1.4 s
      Run page, every read (all series, markers, bucket strip): cold 180 ms, warm ...
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pyarrow as pa
import streamlit.logger

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import settings as settings_mod
from app import tiler
from app.monitor import Monitor
from app.read import markers, series, strip
from samples.long_run import write_run

ROOT = Path(__file__).resolve().parents[1]
RUN = "big"



def page_panels() -> tuple:
    """The Run page's default panels, gap panels and points, from the page's own module
    (imported before any timing: it imports streamlit)."""
    from app.dashboard.panels import DEFAULT_METRICS, GAP_METRICS
    from app.dashboard.reads import POINTS

    return DEFAULT_METRICS, GAP_METRICS, POINTS


def chart_data(cursor, panels: tuple, lo=None, hi=None) -> list:
    """What the Run page reads for its charts (views/run.py and panels.py), one call each as
    the page makes them; the frames the page draws."""
    default, gap_panels, points = panels
    series.version(cursor, RUN)
    names, _axes = series.names_and_axes(cursor, RUN)
    series.step_span(cursor, RUN)
    plain = [m for m in default if m in names and m not in gap_panels]
    return [series.series(cursor, RUN, plain, lo=lo, hi=hi, points=points, gaps=True),
            series.typical_gap(cursor, RUN)]


def page_reads(cursor, panels: tuple, lo=None, hi=None) -> list:
    """Everything the Run page reads: its chart data, then the markers and the bucket strip."""
    frames = chart_data(cursor, panels, lo, hi)
    markers.markers(cursor, RUN, lo=lo, hi=hi)
    strip.bucket_strip(cursor, RUN, lo=lo, hi=hi)
    return frames


def timed(fn, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - start) * 1000, result


def cached(cursor) -> str:
    """What DuckDB holds in memory now (its buffer pool by tag), to show what is cold."""
    rows = cursor.execute("SELECT tag, memory_usage_bytes FROM duckdb_memory() "
                          "WHERE memory_usage_bytes > 0 ORDER BY tag").fetchall()
    return ", ".join(f"{tag} {size / 2**20:.1f} MiB" for tag, size in rows) or "nothing"


def per_metric(read: series.Series) -> int:
    """The most rows any one metric has in a series frame."""
    return int(read.frame.groupby("metric").size().max()) if len(read.frame) else 0


def payload(frames: list) -> tuple[int, int]:
    """Bytes of the frames as JSON records and as Arrow IPC streams."""
    json_bytes = arrow_bytes = 0
    for item in frames:
        if not isinstance(item, series.Series):
            continue
        json_bytes += len(item.frame.to_json(orient="records"))
        sink = io.BytesIO()
        table = pa.Table.from_pandas(item.frame, preserve_index=False)
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        arrow_bytes += len(sink.getvalue())
    return json_bytes, arrow_bytes


def build(lines: int, base: Path) -> tuple[Path, dict]:
    logs = base / f"logs-{lines}"
    start = time.perf_counter()
    write_run(logs / RUN / "metrics.jsonl", lines)
    figures = {"write_s": time.perf_counter() - start}
    monitor = Monitor.open(logs, settings_mod.resolve())
    try:
        figures["ingest_s"] = timed(monitor.tailer.catch_up)[0] / 1000
        figures["tiles_s"] = timed(tiler.roll, monitor.db)[0] / 1000
    finally:
        monitor.close()
    (logs / RUN / "metrics.jsonl").unlink()  # the database holds it all now
    return logs, figures


def server_figures(lines: int, base: Path, panels: tuple) -> dict:
    logs, figures = build(lines, base)
    lo, hi = lines // 2, lines // 2 + lines // 100 - 1
    monitor = Monitor.open(logs, settings_mod.resolve())  # a new DuckDB instance: nothing cached
    try:
        cursor = monitor.db.cursor()
        figures["cold_cache"] = cached(cursor)
        figures["cold_ms"], frames = timed(page_reads, cursor, panels)
        figures["warm_cache"] = cached(cursor)
        figures["warm_ms"], _ = timed(page_reads, cursor, panels)
        figures["series_ms"], _ = timed(chart_data, cursor, panels)
        figures["zoom_ms"], zoom = timed(page_reads, cursor, panels, lo, hi)
        figures["zoom_warm_ms"], _ = timed(page_reads, cursor, panels, lo, hi)
        figures["json_bytes"], figures["arrow_bytes"] = payload(frames)
        figures["zoom_json_bytes"], figures["zoom_arrow_bytes"] = payload(zoom)
        figures["points"] = per_metric(frames[0])
        figures["zoom_lines"] = zoom[0].lines
        figures["zoom_points"] = per_metric(zoom[0])
    finally:
        monitor.close()
    return figures


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
PANELS = 8  # loss, accuracy, hs_queue_depth, tok_per_sec, lr, two gap charts, bucket strip


def browser_figures(url: str, run: str = RUN) -> dict:
    """Open the Run page in headless Chromium twice (the second time with Streamlit's static
    files cached, as a user's tab has them) and measure what the page itself costs: bytes of
    data over the websocket, bytes over HTTP, and seconds until every panel is drawn."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1200})
        counts = _count_bytes(page)
        figures = {}
        for visit in ("first", "again"):
            counts.update(ws=0, http=0)
            start = time.perf_counter()
            page.goto(f"{url}/run?{urlencode({'run': run})}")
            page.wait_for_function(
                "n => document.querySelectorAll('[data-testid=stVegaLiteChart] canvas, "
                "[data-testid=stVegaLiteChart] svg.marks').length >= n", arg=PANELS,
                timeout=120_000)
            figures[visit] = {"drawn_s": time.perf_counter() - start, **counts}
        browser.close()
    return figures


def _count_bytes(page) -> dict:
    counts = {"ws": 0, "http": 0}
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")

    def frame(event):
        response = event["response"]
        data = response["payloadData"]
        # binary frames (Streamlit's protobuf messages) arrive base64-encoded
        counts["ws"] += len(data) * 3 // 4 if response["opcode"] == 2 else len(data.encode())

    def loaded(event):
        counts["http"] += event["encodedDataLength"]

    cdp.on("Network.webSocketFrameReceived", frame)
    cdp.on("Network.loadingFinished", loaded)
    return counts


def serve(logs: Path):
    """The real server on the bench's log directory, as a user starts it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--logdir", str(logs),
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("the server did not start within 120 s")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def report(lines: int, f: dict) -> str:
    return (f"{lines:,} lines: ingest {f['ingest_s']:.1f} s, tiles {f['tiles_s']:.1f} s\n"
            f"  cold = a new DuckDB instance holding: {f['cold_cache']} "
            f"(after the cold read: {f['warm_cache']})\n"
            f"  Run page, every read (all series, markers, bucket strip): cold "
            f"{f['cold_ms']:.0f} ms, warm {f['warm_ms']:.0f} ms (series alone "
            f"{f['series_ms']:.0f} ms); 1% zoom at full resolution ({f['zoom_lines']:,} raw "
            f"lines, <= {f['zoom_points']} rows a metric): {f['zoom_ms']:.0f} ms (warm "
            f"{f['zoom_warm_ms']:.0f} ms)\n"
            f"  payload {f['json_bytes'] / 1024:.0f} KiB JSON, {f['arrow_bytes'] / 1024:.0f} KiB"
            f" Arrow (zoom {f['zoom_json_bytes'] / 1024:.0f} / "
            f"{f['zoom_arrow_bytes'] / 1024:.0f} KiB), <= {f['points']} rows a metric"
            + "".join(f"\n  in Chromium, {visit} visit: charts drawn {b['drawn_s']:.1f} s after "
                      f"the request; {b['ws'] / 1024:.0f} KiB over the websocket (the page's "
                      f"data), {b['http'] / 1024:.0f} KiB over HTTP (Streamlit's own files)"
                      for visit, b in f.get("browser", {}).items()))


def main() -> None:
    # without a runtime, each of the page module's cache decorators would log a warning
    streamlit.logger.set_log_level("error")
    panels = page_panels()
    base = Path(tempfile.mkdtemp(prefix="cliffwatch-bench-dash-",
                                 dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        for lines in (1_000_000, 10_000_000):
            figures = server_figures(lines, base, panels)
            proc, url = serve(base / f"logs-{lines}")
            try:
                figures["browser"] = browser_figures(url)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            print(report(lines, figures), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
