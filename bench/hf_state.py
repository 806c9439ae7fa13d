"""A large Hugging Face ``trainer_state.json`` (issue 18, finding 16). Prints the file's size,
then for ``python -m app ingest --once`` run as a whole process on it:

(a) the first read, on a fresh database: wall time, peak RSS, the rows it says it ingested;
(b) the same command again, the file unchanged: what a process costs whatever it reads;
(c) a rewrite that appends ``--more`` entries, as the Trainer saves (the whole file written
    again, ``json.dumps(indent=2, sort_keys=True)``): the same figures. The issue measured
    18-51 s and 2.5-3.1 GB at each rewrite of a file just under the 256 MiB cap, and "ingested
    0 rows" printed though 2.3 M rows were stored.

Each run ends by counting the rows stored (no step twice), so a figure is never of a read that
lost or repeated entries::

    python bench/hf_state.py [--entries 500000] [--more 3]

500,000 training entries (and an eval entry every 50) make about 80 MiB.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
EVAL_EVERY = 50  # the Trainer's eval_steps / logging_steps, say


def history(count: int, start: int = 0) -> list[dict]:
    """Training entries at every 10 steps and an eval entry every EVAL_EVERY, as logged."""
    out = []
    for i in range(start, start + count):
        step = 10 * (i + 1)
        out.append({"epoch": round(step / 2e6, 6), "grad_norm": 1.0 + (i % 97) / 100,
                    "learning_rate": 2e-05 * (1 - i / 1e7), "loss": 2.0 / (1 + i / 1000),
                    "step": step})
        if i % EVAL_EVERY == EVAL_EVERY - 1:
            out.append({"epoch": round(step / 2e6, 6), "eval_loss": 1.5, "eval_runtime": 31.2,
                        "eval_samples_per_second": 40.1, "eval_steps_per_second": 5.0,
                        "step": step})
    return out


def state(entries: list[dict]) -> bytes:
    """As TrainerState.save_to_json writes it."""
    last = entries[-1]
    top = {"best_metric": None, "best_model_checkpoint": None, "epoch": last["epoch"],
           "eval_steps": 500, "global_step": last["step"], "is_hyper_param_search": False,
           "is_local_process_zero": True, "is_world_process_zero": True,
           "log_history": entries, "logging_steps": 10, "max_steps": 10**7,
           "num_train_epochs": math.ceil(last["epoch"]) + 1, "save_steps": 500,
           "total_flos": 1e18, "train_batch_size": 8, "trial_name": None, "trial_params": None}
    return (json.dumps(top, indent=2, sort_keys=True) + "\n").encode()


def ingest_once(logs: Path, db: Path) -> tuple[float, int, str]:
    """(seconds, peak RSS in MB, what it printed) of one ``ingest --once`` process."""
    started = time.monotonic()
    # VmHWM, not ru_maxrss: that one starts at the forking parent's (this script holds the
    # history), whatever the child itself uses
    code = ("import runpy, sys; sys.argv = ['app'] + sys.argv[1:]\n"
            "try:\n    runpy.run_module('app', run_name='__main__')\n"
            "finally:\n    print([l for l in open('/proc/self/status') if l.startswith('VmHWM')]"
            "[0], file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, "ingest", "--logdir", str(logs), "--db",
                           str(db), "--once"], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    took = time.monotonic() - started
    if done.returncode:
        raise SystemExit(f"ingest failed: {done.stdout}{done.stderr}")
    peak = int(re.search(r"VmHWM:\s+(\d+) kB", done.stderr).group(1)) // 1024
    return took, peak, done.stdout.splitlines()[0]


def stored(db: Path) -> tuple[int, int, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows, steps = con.execute("SELECT count(*), count(DISTINCT step) FROM metric_rows"
                                  ).fetchone()
        evals = con.execute("SELECT count(*) FROM eval_rows").fetchone()[0]
    return rows, steps, evals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=500_000, help="training entries")
    parser.add_argument("--more", type=int, default=3, help="entries the rewrite appends")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cw-bench-hf-"))
    try:
        logs, db = folder / "logs", folder / "cw.duckdb"
        path = logs / "hf" / "trainer_state.json"
        path.parent.mkdir(parents=True)
        entries = history(args.entries)
        path.write_bytes(state(entries))
        print(f"trainer_state.json: {path.stat().st_size / 2**20:.1f} MiB, {len(entries)} "
              f"log_history entries")
        for name in ("first read", "nothing changed (the process's own cost)",
                     f"rewrite with {args.more} more entries"):
            if name.startswith("rewrite"):
                path.write_bytes(state(entries + history(args.more, start=args.entries)))
            took, peak, said = ingest_once(logs, db)
            rows, steps, evals = stored(db)
            print(f"{name}: {took:.2f} s, peak RSS {peak} MB; it says '{said}'; stored "
                  f"{rows} training rows ({steps} distinct steps) and {evals} eval rows")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
