"""What the machine was doing during a run (``system_samples`` and ``system_gpus``, filled
from its ``system.jsonl``; migration 0025), for the Run page's System panel and ``GET
/metrics``. ``series`` gives the panel's rows, bounded by design (about ``points`` buckets
per series, whatever the run's length)::

    chart          series     x      step   value  peak   n
    utilisation %  CPU, host  10.0   10     31.0   31.0   1
    utilisation %  GPU 0      10.0   10     98.0   98.0   1
    memory GiB     host used  10.0   10     48.0   48.0   1
    disk MB/s      write      2000.0 2000   150.0  157.3  3

and ``families`` the Prometheus gauges of each exported run's newest sample::

    cliffwatch_run_system_cpu_percent{host="gpu-box-1",run="sweep3/lr1e-4"} 37.5
    cliffwatch_run_gpu_utilization_percent{gpu="0",host="gpu-box-1",run="sweep3/lr1e-4"} 98.0
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

from ..db import queries
from . import frame

if TYPE_CHECKING:  # /metrics needs no pandas: the server starts without it
    import pandas as pd

POINTS = 500  # buckets per series: a chart's width in pixels, about
CHARTS = ("utilisation %", "memory GiB", "disk MB/s")  # the panel's charts, in its order
COLUMNS = ["chart", "series", "x", "step", "value", "peak", "n"]
PREFIX = "cliffwatch_"  # prometheus.py's


def version(cursor, run: str) -> tuple:
    """A cheap cache key: changes whenever the run gets samples; (0, 0, 0) without any."""
    return tuple(queries.execute(cursor, "read/system_version", {"run": run}).fetchall()[0])


def series(cursor, run: str, *, x: str = "step", lo=None, hi=None,
           points: int = POINTS) -> pd.DataFrame:
    """The System panel's rows of ``run`` on the page's ``x`` (step, elapsed or time), in the
    zoom's steps [lo, hi]; swap only if the run ever used any. Empty without samples."""
    rows = frame(cursor, "read/system_series", {"run": run, "x": x, "lo": lo, "hi": hi,
                                                "points": points})[COLUMNS]
    swap = rows["series"] == "swap used"
    if not (rows.loc[swap, "peak"] > 0).any():
        rows = rows[~swap]
    return rows.reset_index(drop=True)


# (column, gauge name after the prefix, help, extra label): a sample's gauges, labelled by
# run and host (and the disk's device for its rates)
SAMPLE_GAUGES = (
    ("time", "run_system_sample_timestamp_seconds", "When the run's newest system sample "
     "was taken (Unix seconds, the sampler's clock)", None),
    ("cpu_percent", "run_system_cpu_percent", "Host CPU use, all cores (percent)", None),
    ("cpu_max_core_percent", "run_system_cpu_max_core_percent", "The busiest core's use "
     "(percent): 100 with the GPU idle is an input pipeline bound to one core", None),
    ("proc_cpu_percent", "run_system_process_cpu_percent", "The training process's CPU use "
     "(percent of one core)", None),
    ("proc_rss_bytes", "run_system_process_rss_bytes", "The training process's resident "
     "memory", None),
    ("mem_used_bytes", "run_system_memory_used_bytes", "Host memory in use", None),
    ("mem_total_bytes", "run_system_memory_total_bytes", "Host memory in all", None),
    ("swap_used_bytes", "run_system_swap_used_bytes", "Host swap in use", None),
    ("disk_read_bps", "run_system_disk_read_bytes_per_second", "Bytes per second read from "
     "the disk holding the run folder", "disk"),
    ("disk_write_bps", "run_system_disk_write_bytes_per_second", "Bytes per second written "
     "to the disk holding the run folder", "disk"),
    ("net_recv_bps", "run_system_network_receive_bytes_per_second", "Network bytes per "
     "second received by the host", None),
    ("net_sent_bps", "run_system_network_transmit_bytes_per_second", "Network bytes per "
     "second sent by the host", None),
)
GPU_GAUGES = (
    ("util_percent", "run_gpu_utilization_percent", "A GPU's utilisation (percent, NVML)"),
    ("mem_used_bytes", "run_gpu_memory_used_bytes", "A GPU's memory in use"),
    ("mem_total_bytes", "run_gpu_memory_total_bytes", "A GPU's memory in all"),
    ("power_w", "run_gpu_power_watts", "A GPU's power draw"),
    ("temp_c", "run_gpu_temperature_celsius", "A GPU's temperature"),
)


def latest(cursor, runs: list[str], since: float) -> tuple[list[dict], list[dict]]:
    """The newest sample of each of ``runs`` taken since ``since``, and its GPUs' rows."""
    if not runs:
        return [], []
    params = {"runs": runs, "since": since}
    return (_dicts(queries.execute(cursor, "metrics/system_samples", params)),
            _dicts(queries.execute(cursor, "metrics/system_gpus", params)))


def _dicts(result) -> list[dict]:
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def families(samples: list[dict], gpus: list[dict]) -> Iterator[GaugeMetricFamily]:
    """The gauges of the newest samples (``latest``); a value the sampler did not write is
    left out, not exported as 0."""
    for column, name, help_text, extra in SAMPLE_GAUGES:
        labels = ["run", "host", *([extra] if extra else [])]
        gauge = GaugeMetricFamily(PREFIX + name, help_text, labels=labels)
        for row in samples:
            if row[column] is not None:
                gauge.add_metric([_label(row[k]) for k in labels], row[column])
        yield gauge
    for column, name, help_text in GPU_GAUGES:
        gauge = GaugeMetricFamily(PREFIX + name, help_text, labels=["run", "host", "gpu"])
        for row in gpus:
            if row[column] is not None and row["gpu"] is not None:
                gauge.add_metric([row["run"], _label(row["host"]), str(row["gpu"])],
                                 row[column])
        yield gauge


def _label(value) -> str:
    return "" if value is None else str(value)
