"""GPU check of the system sampler (issue 21): NVML's numbers from a real GPU during a real run.

For a machine with an NVIDIA GPU, its driver, CUDA torch, psutil and nvidia-ml-py (the
`trainer` extra). It starts the sampler (cliffwatch/system.py, `sample_s` 0.5) on a run
folder, trains a short demo run on the GPU in that folder (`python -m trainer --preset demo
--device=cuda`), stops the sampler, and prints every sample's `gpus` fields and a summary. Exit
0 when every GPU reported all five fields and one was busy during training; 1 otherwise (no
NVML, no GPU, a field always null, utilisation never above 0); 2 when the run itself failed.

    python bench/gpu_check.py [--steps 300] [--timeout 420] [--out DIR]

Not run on the CPU machines (no NVML there): the README says what has been checked on a GPU.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cliffwatch import system  # noqa: E402
from cliffwatch.gpu import Gpus  # noqa: E402

FIELDS = ("util_percent", "mem_used_bytes", "mem_total_bytes", "power_w", "temp_c")
GIB = 1 << 30


def last_step(run: Path):
    """The trainer's last logged step, read from its metrics.jsonl (a separate process)."""
    def read() -> int | None:
        try:
            lines = (run / "metrics.jsonl").read_bytes().splitlines()
            return json.loads(lines[-1]).get("step") if lines else None
        except (OSError, ValueError):
            return None
    return read


def train(run: Path, steps: int, timeout: float) -> int:
    argv = [sys.executable, "-m", "trainer", "--out", str(run), "--preset", "demo",
            "--device=cuda", f"--steps={steps}"]
    print("$", " ".join(argv), flush=True)
    try:
        return subprocess.run(argv, cwd=ROOT, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"the run took over {timeout:.0f} s (--timeout); its samples so far follow")
        return 0


def show(lines: list[dict]) -> None:
    print(f"{'elapsed_s':>9} {'step':>6} gpu {'util%':>6} {'mem_used_GiB':>12} "
          f"{'mem_total_GiB':>13} {'power_w':>8} {'temp_c':>6}")
    for line in lines:
        for gpu in line.get("gpus") or []:
            used, total = gpu.get("mem_used_bytes"), gpu.get("mem_total_bytes")
            print(f"{line['elapsed_s']:>9.1f} {line.get('step')!s:>6} {gpu['index']:>3} "
                  f"{gpu.get('util_percent')!s:>6} "
                  f"{'-' if used is None else f'{used / GIB:.2f}':>12} "
                  f"{'-' if total is None else f'{total / GIB:.2f}':>13} "
                  f"{gpu.get('power_w')!s:>8} {gpu.get('temp_c')!s:>6}")


def verdict(lines: list[dict]) -> list[str]:
    """What is wrong with the samples' GPU fields ([] = the check passed)."""
    gpus = [gpu for line in lines for gpu in line.get("gpus") or []]
    if not gpus:
        return ["no sample has a GPU: NVML found none"]
    problems = [f"{field} is null in every sample" for field in FIELDS
                if all(gpu.get(field) is None for gpu in gpus)]
    if max((gpu.get("util_percent") or 0) for gpu in gpus) <= 0:
        problems.append("util_percent never rose above 0 while the run trained")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="demo steps (default 300)")
    parser.add_argument("--timeout", type=float, default=420,
                        help="seconds the run may take (default 420)")
    parser.add_argument("--out", type=Path, help="run folder (default: a new temporary one)")
    args = parser.parse_args()
    gpus = Gpus()
    print(f"NVML: {len(gpus.handles)} GPU(s)" if gpus.nvml else "NVML: not available")
    gpus.close()
    run = args.out or Path(tempfile.mkdtemp(prefix="cliffwatch-gpu-check-"))
    # a folder of its own: a trainer that starts its own sampler writes run/system.jsonl
    (run / "sampler").mkdir(parents=True, exist_ok=True)
    sampler = system.start(run / "sampler", rank=0, last_step=last_step(run), sample_s=0.5)
    if sampler is None:
        return 1
    code = train(run, args.steps, args.timeout)
    sampler.stop()
    lines = [json.loads(x) for x in (run / "sampler" / system.FILE).read_text().splitlines()]
    show(lines)
    problems = verdict(lines)
    print(f"{len(lines)} samples in {run / 'sampler' / system.FILE}; run exit {code}")
    print("GPU check: " + ("; ".join(problems) if problems else "every field reported, "
          f"max util {max(g['util_percent'] or 0 for ln in lines for g in ln['gpus'])}%"))
    return 2 if code else (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
