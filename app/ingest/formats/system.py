"""``system.jsonl``: what the machine was doing, one sample every few seconds (cliffwatch's
sampler writes it in the run folder; docs/log-format.md), as rows of ``system_samples`` and
``system_gpus`` (migration 0025). The line at byte 0::

    {"time": 1795939212.04, "elapsed_s": 12.0, "step": 40, "host": "gpu-box-1",
     "cpu_percent": 37.5, "disk_write_bps": 157286400.0, ...,
     "gpus": [{"index": 0, "util_percent": 98.0, "mem_used_bytes": 80530636800, ...}]}

becomes ``Parsed(system=<1 row: time 1795939212.04, step 40, cpu_percent 37.5, ...>,
gpus=<1 row: time 1795939212.04, step 40, host "gpu-box-1", gpu 0, util_percent 98.0, ...>)``.
Any field may be missing or null (another sampler, an old version): NULL. A value of the
wrong type is NULL too, with a warning at its line; a line that is no JSON object is an error
at its byte offset, and the lines around it are stored. Keys not named here are not read.
"""

from __future__ import annotations

from ...keys import INT64
from ...lazy import LazyModule
from ..parse import Parsed, Problem, complete_lines, decode_line, excerpt, records_table

pa = LazyModule("pyarrow")

NAME = "system.jsonl"
KIND = "system"  # files.kind
INT32 = (-(2**31), 2**31 - 1)

# (key, type): system_samples' columns as the line names them (run is the file's)
SAMPLE = (("time", "double"), ("elapsed_s", "double"), ("step", "bigint"),
          ("host", "text"), ("pid", "bigint"), ("sample_s", "double"),
          ("cpu_percent", "double"), ("cpu_max_core_percent", "double"),
          ("cpu_count", "integer"), ("proc_cpu_percent", "double"),
          ("proc_rss_bytes", "bigint"), ("mem_used_bytes", "bigint"),
          ("mem_total_bytes", "bigint"), ("swap_used_bytes", "bigint"), ("disk", "text"),
          ("disk_read_bps", "double"), ("disk_write_bps", "double"),
          ("disk_read_bytes", "bigint"), ("disk_write_bytes", "bigint"),
          ("net_recv_bps", "double"), ("net_sent_bps", "double"))
# one GPU's values in the line's "gpus" list; "index" is system_gpus' column gpu
GPU = (("index", "integer"), ("util_percent", "double"), ("mem_used_bytes", "bigint"),
       ("mem_total_bytes", "bigint"), ("power_w", "double"), ("temp_c", "double"))
GPU_SHARED = ("time", "step", "host")  # a GPU row's values from its sample
ARROW = {"double": "float64", "bigint": "int64", "integer": "int32", "text": "string"}


def parse(data: bytes, base: int) -> Parsed:
    """The samples of ``data``'s complete lines (``base``: its file offset)."""
    out = Parsed()
    samples: list[dict] = []
    gpus: list[dict] = []
    for offset, raw in complete_lines(data, base, out):
        decoded = decode_line(raw, offset, out.problems)
        if decoded is None:
            continue
        odd: list[str] = list(decoded[1])
        sample = _values(decoded[0], SAMPLE, odd, "")
        samples.append(sample)
        gpus += _gpus(decoded[0].get("gpus"), sample, odd)
        if odd:
            out.problems.append(Problem(offset, "warning", "; ".join(odd), excerpt(raw)))
    if samples:
        out.system = records_table(samples, schema(SAMPLE))
    if gpus:
        out.gpus = records_table(gpus, schema(
            [(k, t) for k, t in SAMPLE if k in GPU_SHARED] + [("gpu", "integer")]
            + [g for g in GPU if g[0] != "index"]))
    return out


def schema(columns) -> pa.Schema:
    return pa.schema([(name, ARROW[kind]) for name, kind in columns])


def _gpus(value: object, sample: dict, odd: list[str]) -> list[dict]:
    """The GPU rows of one sample; ``gpus`` that is not a list of objects is noted."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(g, dict) for g in value):
        odd.append("'gpus' is not a list of objects; no GPU values stored")
        return []
    rows = []
    for i, gpu in enumerate(value):
        row = _values(gpu, GPU, odd, f"gpus[{i}].")
        row["gpu"] = row.pop("index")
        rows.append(row | {k: sample[k] for k in GPU_SHARED})
    return rows


def _values(obj: dict, columns, odd: list[str], where: str) -> dict:
    return {key: _value(obj.get(key), kind, odd, where + key) for key, kind in columns}


def _value(value: object, kind: str, odd: list[str], key: str):
    """A field as its column's type, or None (noted unless it was missing or null)."""
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "text" and isinstance(value, str):
        return value
    if kind == "double" and number:
        try:
            return float(value)
        except OverflowError:  # an integer past a double: noted below
            pass
    if kind in ("bigint", "integer") and number:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 2147483648.0 bytes: a count another sampler wrote as float
        bounds = INT32 if kind == "integer" else INT64
        if isinstance(value, int) and bounds[0] <= value <= bounds[1]:
            return value
    odd.append(f"'{key}' is not {_WHAT[kind]} ({str(value)[:40]}); stored as NULL")
    return None


_WHAT = {"double": "a number", "bigint": "an integer within 64 bits",
         "integer": "an integer within 32 bits", "text": "a string"}
