"""`replay SRC --to RUN_DIR --speed X`: writes an existing log again, line by line, keeping its
original pacing (from ``elapsed_s``, else ``time``) divided by X. Used by ``make demo``, by the
tests of live behaviour, and to try alert rules on a past incident.

Lines of metrics.jsonl, events.jsonl and rank files are interleaved in time order, and written
byte for byte as they were (a bad line stays bad).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from ..errors import CliffwatchError
from ..ingest.scan import kind_of

NO_CLOCK_INTERVAL_S = 1.0  # pacing for logs that carry no time at all


def _line_time(raw: bytes) -> float | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    for key in ("elapsed_s", "time"):
        value = obj.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _timeline(path: Path, order: int) -> list[tuple[float, int, int, bytes]]:
    """(time, file order, line number, raw line) for every line of one file. The clock never
    goes back within a file: a resumed run restarting ``elapsed_s`` at 0 continues from the
    last time, so each file keeps its line order."""
    out, last, shift = [], 0.0, 0.0
    for number, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
        t = _line_time(raw)
        if t is None:
            t = last + (0.0 if order else NO_CLOCK_INTERVAL_S) - shift
        if t + shift < last:
            shift = last - t
        last = t + shift
        out.append((last, order, number, raw))
    return out


def _sources(src: Path) -> list[tuple[Path, str]]:
    """(source file, name to write) pairs."""
    if src.is_file():
        name = src.name if kind_of(src.name) else "metrics.jsonl"
        return [(src, name)]
    if not src.is_dir():
        raise CliffwatchError(f"{src} is neither a run folder nor a .jsonl file")
    files = [(p, p.name) for p in sorted(src.iterdir()) if p.suffix == ".jsonl" and kind_of(p.name)]
    if not files:
        raise CliffwatchError(f"{src} holds no metrics.jsonl, events.jsonl or rank*.jsonl")
    return files


def replay(src: Path, dest: Path, *, speed: float = 1.0, force: bool = False) -> int:
    if speed <= 0:
        raise CliffwatchError("--speed must be above 0 (2 means twice as fast)")
    sources = _sources(Path(src))
    dest = Path(dest)
    if any((dest / name).exists() for _, name in sources) and not force:
        raise CliffwatchError(f"{dest} already holds a log; pick a new folder or pass --force")
    dest.mkdir(parents=True, exist_ok=True)
    if Path(src).is_dir() and (Path(src) / "run.json").exists():
        shutil.copyfile(Path(src) / "run.json", dest / "run.json")
    items = sorted(i for order, (path, _) in enumerate(sources) for i in _timeline(path, order))
    handles = [open(dest / name, "wb") for _, name in sources]  # noqa: SIM115
    try:
        return _play(items, handles, speed)
    finally:
        for handle in handles:
            handle.close()


def _play(items, handles, speed: float) -> int:
    if not items:
        return 0
    t0, start = items[0][0], time.monotonic()
    for t, order, _, raw in items:
        delay = start + (t - t0) / speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        handles[order].write(raw)
        handles[order].flush()
    return len(items)
