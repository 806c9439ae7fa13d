"""How far a resumed CUDA run is from a straight one, with CUDA's default kernels and with
deterministic ones (docs/trainer.md quotes it). For a machine with an NVIDIA GPU and CUDA
torch; in-process runs of the tiny preset: 2N steps straight twice, and N + resume + N.

    python bench/gpu_resume.py [--out DIR] [--device cuda]

Prints, for each mode, the largest difference of any parameter or optimizer state between
the two straight runs and between straight and resumed. On an H200 (2026-12-04, torch 2.11 +
CUDA 13): default 3.0e-4 and 2.2e-4, deterministic 0 and 0. Each mode runs in a process of
its own (deterministic kernels are a process-wide switch).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainer.checkpoint import checkpoint_path, trained_tensors  # noqa: E402
from trainer.config import make_config  # noqa: E402
from trainer.train import train  # noqa: E402

N = 10  # steps before the resume; crosses the tiny preset's first epoch boundary


def apart(a: Path, b: Path) -> float:
    """The largest difference between the two runs' tensors at their last checkpoint."""
    last = [trained_tensors(checkpoint_path(run, 2 * N)) for run in (a, b)]
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(*last, strict=True))


def one_mode(out: Path, device: str, strict: bool) -> None:
    common = {"steps": 2 * N, "ckpt_every": N, "log_every_steps": 1, "device": device,
              "deterministic": strict, "progress": "off"}
    mode = "deterministic" if strict else "default"

    def run(name: str, **more) -> Path:
        folder = out / f"{mode}-{name}"
        train(make_config("tiny", out=str(folder), **common, **more))
        return folder

    first, second = run("straight"), run("straight-again")
    resumed = run("resumed", stop_after=N)
    run("resumed", resume="latest")
    print(f"{device} {mode} kernels: straight vs straight {apart(first, second):.3g}; "
          f"straight vs resumed {apart(first, resumed):.3g}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="runs folder (default: a temporary one)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--mode", choices=["default", "deterministic"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="cliffwatch-gpu-resume-"))
    if args.mode:
        one_mode(out, args.device, args.mode == "deterministic")
        return 0
    for mode in ("default", "deterministic"):
        done = subprocess.run([sys.executable, __file__, "--out", str(out), "--device",
                               args.device, "--mode", mode], cwd=ROOT)
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
