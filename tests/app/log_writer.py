"""A writer process for the crash test: appends lines across several runs, some in two
pieces (so a reader sees unfinished lines), with planted bad lines, then writes a manifest.

    python tests/app/log_writer.py LOGDIR LINES RUNS SECONDS
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

BAD = [b'{"step": 1, "loss": }', b'{"loss": 0.5}', b"[1, 2]", b"   ", b"\x00\xff\x10garbage"]


def main(logdir: Path, total: int, runs: int, seconds: float) -> None:
    handles, sizes, steps = [], [], [0] * runs
    for r in range(runs):
        (logdir / f"run{r}").mkdir(parents=True, exist_ok=True)
        handles.append(open(logdir / f"run{r}" / "metrics.jsonl", "ab"))  # noqa: SIM115
        sizes.append(0)
    planted, batch = [], 1000
    start = time.monotonic()
    for seq in range(total):
        r = seq % runs
        if seq % 5000 == 4999:
            line = BAD[(seq // 5000) % len(BAD)] + b"\n"
            planted.append([f"run{r}/metrics.jsonl", sizes[r]])
        else:
            steps[r] += 1
            line = json.dumps({"step": steps[r], "loss": 1.0 / steps[r], "seq": seq}).encode()
            line += b"\n"
        if seq % 97 == 0:  # two writes: the reader may see half a line
            handles[r].write(line[:7])
            handles[r].flush()
            line = line[7:]
        handles[r].write(line)
        handles[r].flush()
        sizes[r] += len(line) + (7 if seq % 97 == 0 else 0)
        if seq % batch == batch - 1:
            target = start + seconds * (seq + 1) / total
            time.sleep(max(0.0, target - time.monotonic()))
    for handle in handles:
        handle.close()
    (logdir.parent / "manifest.json").write_text(json.dumps({"planted": planted}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
