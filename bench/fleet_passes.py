"""Idle passes of live diagnosis and the alert rules with thousands of finished runs (issue 12,
section 1): what one pass costs when nothing was ingested, in milliseconds and in queries
(calls into app.db.queries), after a first pass has judged every run. Prints one line per
fleet size::

      runs |  diagnosis: ms   CPU ms  queries |  alerts: ms   CPU ms  queries   (per idle pass)
      2000 |            ...

    python bench/fleet_passes.py [--runs 2000 10000] [--passes 20]

The database is built as tests/app/test_fleet_idle_work.py builds it: two runs ingested by the
tailer (one finished, one live), then the finished one copied under ``runs`` new names.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import settings as settings_mod  # noqa: E402
from app.alerts.engine import Engine  # noqa: E402
from app.alerts.rules import Rule, default_rules  # noqa: E402
from app.db import queries  # noqa: E402
from app.diagnose.detect import Watch  # noqa: E402
from app.diagnose.diagnosis import LiveDiagnosis  # noqa: E402
from app.monitor import Monitor  # noqa: E402
from tests.app import fleet_db  # noqa: E402

RULES = [*default_rules(), Rule(name="loss-high", type="threshold", metric="loss", op=">",
                                value=50.0)]


def write_run(folder: Path, finished: bool) -> None:
    folder.mkdir(parents=True)
    rows = [{"step": s, "loss": 2.0 / (1 + s), "accuracy": s / 20, "elapsed_s": s * 5.0}
            for s in range(20)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    events = [{"event": "run_start", "step": 0, "elapsed_s": 0.0}]
    if finished:
        events.append({"event": "run_end", "step": 19, "elapsed_s": 100.0,
                       "status": "completed"})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


class Counted:
    """Counts calls into app.db.queries by query name while installed."""

    def __init__(self):
        self.calls: collections.Counter = collections.Counter()
        self.originals = {n: getattr(queries, n) for n in ("execute", "arrow", "arrow_small")}

    def __enter__(self):
        for name, original in self.originals.items():
            setattr(queries, name, self._wrap(original))
        return self

    def _wrap(self, original):
        def counted(cursor, name, *args, **kwargs):
            self.calls[name] += 1
            return original(cursor, name, *args, **kwargs)
        return counted

    def __exit__(self, *exc):
        for name, original in self.originals.items():
            setattr(queries, name, original)


def measure(runs: int, passes: int) -> tuple[float, ...]:
    """(ms, CPU ms, queries) per idle pass of diagnosis, then of the alert rules."""
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        write_run(logs / "done", True)
        write_run(logs / "live", False)
        with Monitor.open(logs, settings_mod.resolve()) as mon:
            mon.tailer.catch_up()
            fleet_db.copy_run(mon.db.cursor(), "done", runs)
            live, engine = LiveDiagnosis(mon.db, Watch()), Engine(mon.db, RULES, ["log"])
            live.update()
            engine.evaluate()
            while engine.behind:  # a first pass reads at most engine.MAX_LINES lines
                engine.evaluate()
            figures = []
            for work in (live.update, engine.evaluate):
                with Counted() as counted:
                    started, cpu = time.perf_counter(), time.process_time()
                    for _ in range(passes):
                        work()
                    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
                figures += [1000 * elapsed / passes, 1000 * cpu / passes,
                            sum(counted.calls.values()) / passes]
            return tuple(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[2000, 10000])
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args()
    print(f"{'runs':>6} | {'diagnosis: ms':>14} {'CPU ms':>8} {'queries':>8} | "
          f"{'alerts: ms':>11} {'CPU ms':>8} {'queries':>8}   (per idle pass)")
    for runs in args.runs:
        d_ms, d_cpu, d_q, a_ms, a_cpu, a_q = measure(runs, args.passes)
        print(f"{runs:>6} | {d_ms:>14.1f} {d_cpu:>8.1f} {d_q:>8.1f} | "
              f"{a_ms:>11.1f} {a_cpu:>8.1f} {a_q:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
