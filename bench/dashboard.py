"""The Run page's chart data for a 1,000,000- and a 10,000,000-line run, server side.

Builds each seed-format run (samples/seed-cliff keys, buckets lists included) with DuckDB's
COPY under /dev/shm, ingests it as the server does (Monitor + catch_up), rolls its chart
tiles, then times the Run page's reads the way app/dashboard/views/run.py makes them, one
call each: version, metric_names, axes, step_span, series (the default panels' metrics),
gaps and typical_gap ("chart data"); markers and the bucket strip (app/read, issue 9's H3)
are timed apart. Each is timed

- cold: the database closed and opened again (a new DuckDB instance: its buffer pool, block
  metadata and object cache empty, as the line printed before the figures shows; the OS page
  cache still holds the file, which lives in tmpfs, and this process's imports and parsed
  query files are warm);
- warm: the same calls again;
- zoom: 1% of the run at full resolution (its middle; read from raw lines, bucketed);

and the payload of the series frames as JSON and as Arrow IPC. ``browser_figures`` (bytes the
browser received, time until the charts are drawn) is the lead's part (issue 9).

    $ .venv/bin/python bench/dashboard.py
    1,000,000 lines: ingest 1.2 s, tiles 1.4 s; Run page chart data: cold 120 ms, ...
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import streamlit.logger

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import settings as settings_mod
from app.monitor import Monitor
from app.read import markers, series, strip, tiles

RUN = "big"
SPIKE_STEP, STALL_STEP = 654_322, 500_001  # the run's maximum loss; its 167.2 s stall


def write_run(path: Path, lines: int) -> None:
    """A seed-format metrics.jsonl (buckets included), written by DuckDB in about a second a
    million lines: the same shape as tests/app/test_read_series.py's run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.connect().execute(f"""COPY (
        SELECT i + 1 AS step,
               CASE WHEN i + 1 = {SPIKE_STEP} THEN 42.5
                    ELSE 2.0 / (1 + i / 1e5) + (hash(i) % 1000) / 1e5 END AS loss,
               (hash(i * 3) % 1000) / 1e3 AS accuracy, 1e-4 AS lr,
               25000.0 + hash(i) % 1000 AS tok_per_sec, hash(i) % 8 AS hs_queue_depth,
               i * 0.5 + CASE WHEN i + 1 >= {STALL_STEP} THEN 167.2 ELSE 0 END AS elapsed_s,
               i // 100000 AS epoch, [i % 6, (i * 7) % 6] AS buckets
        FROM range({lines}) AS t(i)) TO '{path}' (FORMAT json)""")


def page_panels() -> tuple:
    """The Run page's default panels, gap panels and points, from the page's own module
    (imported before any timing: it imports streamlit)."""
    from app.dashboard.source import DEFAULT_METRICS, GAP_METRICS, POINTS

    return DEFAULT_METRICS, GAP_METRICS, POINTS


def chart_data(cursor, panels: tuple, lo=None, hi=None) -> list:
    """What the Run page reads for its charts (views/run.py: controls() and live()), one call
    each as the page makes them; the frames the page draws."""
    default, gap_panels, points = panels
    series.version(cursor, RUN)
    names = series.metric_names(cursor, RUN)
    series.axes(cursor, RUN)
    series.step_span(cursor, RUN)
    plain = [m for m in default if m in names and m not in gap_panels]
    return [series.series(cursor, RUN, plain, lo=lo, hi=hi, points=points),
            series.gaps(cursor, RUN, lo=lo, hi=hi, points=points),
            series.typical_gap(cursor, RUN)]


def page_extras(cursor, lo=None, hi=None) -> str:
    """The page's other reads, markers and the bucket strip, timed; their failure is printed
    (they are another part's, and may be mid-change), never stops the figures above."""
    start = time.perf_counter()
    try:
        markers.markers(cursor, RUN, lo=lo, hi=hi)
        strip.bucket_strip(cursor, RUN, lo=lo, hi=hi)
    except Exception as exc:
        return f"failed ({type(exc).__name__}: {exc})"
    return f"{(time.perf_counter() - start) * 1000:.0f} ms"


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
        figures["tiles_s"] = timed(tiles.roll, monitor.db)[0] / 1000
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
        figures["cold_ms"], frames = timed(chart_data, cursor, panels)
        figures["warm_cache"] = cached(cursor)
        figures["warm_ms"], _ = timed(chart_data, cursor, panels)
        figures["zoom_ms"], zoom = timed(chart_data, cursor, panels, lo, hi)
        figures["zoom_warm_ms"], _ = timed(chart_data, cursor, panels, lo, hi)
        figures["extras"] = page_extras(cursor)
        figures["zoom_extras"] = page_extras(cursor, lo, hi)
        figures["json_bytes"], figures["arrow_bytes"] = payload(frames)
        figures["zoom_json_bytes"], figures["zoom_arrow_bytes"] = payload(zoom)
        figures["points"] = max(per_metric(frames[0]), per_metric(frames[1]))
        figures["zoom_lines"] = zoom[0].lines
        figures["zoom_points"] = max(per_metric(zoom[0]), per_metric(zoom[1]))
    finally:
        monitor.close()
    return figures


def browser_figures(*_args, **_kwargs) -> dict:
    """Bytes received and time until the charts are drawn, in Chromium: the lead adds it."""
    return {}


def report(lines: int, f: dict) -> str:
    return (f"{lines:,} lines: ingest {f['ingest_s']:.1f} s, tiles {f['tiles_s']:.1f} s\n"
            f"  cold = a new DuckDB instance holding: {f['cold_cache']} "
            f"(after the cold read: {f['warm_cache']})\n"
            f"  Run page chart data (all series): cold {f['cold_ms']:.0f} ms, warm "
            f"{f['warm_ms']:.0f} ms; 1% zoom at full resolution (raw lines: "
            f"{f['zoom_lines']:,} lines, <= {f['zoom_points']} rows a metric): "
            f"{f['zoom_ms']:.0f} ms (warm {f['zoom_warm_ms']:.0f} ms)\n"
            f"  markers + bucket strip: {f['extras']} (zoom {f['zoom_extras']})\n"
            f"  payload {f['json_bytes'] / 1024:.0f} KiB JSON, {f['arrow_bytes'] / 1024:.0f} KiB"
            f" Arrow (zoom {f['zoom_json_bytes'] / 1024:.0f} / "
            f"{f['zoom_arrow_bytes'] / 1024:.0f} KiB), <= {f['points']} rows a metric")


def main() -> None:
    # without a runtime, each of the page module's cache decorators would log a warning
    streamlit.logger.set_log_level("error")
    panels = page_panels()
    base = Path(tempfile.mkdtemp(prefix="cliffwatch-bench-dash-",
                                 dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        for lines in (1_000_000, 10_000_000):
            print(report(lines, server_figures(lines, base, panels)), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
