"""A run that fills the GPU until CUDA is out of memory, logged through the cliffwatch API with
its system sampler on, then diagnosed: the real NVML evidence of diagnosis's gpu_memory cause
(the README's GPU section quotes it). For a machine with an NVIDIA GPU, CUDA torch and
nvidia-ml-py.

    python bench/gpu_oom.py [--out DIR]

Allocates 1/24 of the GPU's memory a step, every 0.6 s, until torch.OutOfMemoryError; prints
`diagnose`'s report of the run. Exit 0 when it names both crash and gpu_memory, 1 otherwise,
2 where the monitor is not installed (the run is kept: diagnose it elsewhere).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fill(logdir: Path) -> None:
    """The run itself (a process of its own: it ends by the error)."""
    import torch

    import cliffwatch

    run = cliffwatch.init(logdir=logdir, name="oom", sample_s=0.5)
    held, chunk = [], torch.cuda.mem_get_info()[1] // 24
    for step in range(1000):
        held.append(torch.ones(chunk, dtype=torch.uint8, device="cuda"))
        run.log({"loss": 2.0 / (step + 1), "gpu_gib": len(held) * chunk / 2**30}, step=step)
        time.sleep(0.6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="log directory (default: a temporary one)")
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="cliffwatch-gpu-oom-"))
    if args.fill:
        fill(out)
        return 0
    subprocess.run([sys.executable, __file__, "--fill", "--out", str(out)], cwd=ROOT,
                   timeout=300)
    done = subprocess.run([sys.executable, "-m", "app", "diagnose", str(out / "oom")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    if "No module named" in done.stderr:  # a GPU box with torch but not the monitor
        print(f"the run is in {out / 'oom'}; the monitor is not installed here: run "
              f"`python -m app diagnose {out / 'oom'}` where it is")
        return 2
    print(done.stdout)
    return 0 if "Likely causes: crash, gpu_memory." in done.stdout else 1


if __name__ == "__main__":
    sys.exit(main())
