"""The trainer as a program: no app imports, quiet without a TTY, a bar with one, torchrun."""

from __future__ import annotations

import ast
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

from trainer_testlib import metrics, read_jsonl

from app.logformat import validate_run

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
TORCHRUN = str(Path(PYTHON).with_name("torchrun"))


def test_trainer_imports_nothing_from_app():
    for path in (ROOT / "trainer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            assert not any(n == "app" or n.startswith("app.") for n in names), path
    code = "import sys, trainer.__main__; print(any(m.split('.')[0] == 'app' for m in sys.modules))"
    out = subprocess.run([PYTHON, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def run_cli(out: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    argv = [PYTHON, "-m", "trainer", "--out", str(out), "--preset=tiny", "--steps=6", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, **kwargs)


def test_without_a_tty_stderr_stays_empty(runs_root):
    done = run_cli(runs_root / "cli-quiet")
    assert done.returncode == 0 and done.stderr == "" and done.stdout == ""
    assert len(metrics(runs_root / "cli-quiet")) == 6


def test_on_a_tty_stderr_shows_a_progress_bar(runs_root):
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    argv = [PYTHON, "-m", "trainer", "--out", str(runs_root / "cli-tty"), "--preset=tiny"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=follower)  # fmt: skip
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        try:
            chunk = os.read(leader, 4096) if ready else b""
        except OSError:  # the child closed the terminal
            chunk = b""
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    assert b"30/30" in seen and b"loss=" in seen


def test_torchrun_two_processes_write_both_rank_files(runs_root):
    out = runs_root / "ddp"
    argv = [TORCHRUN, "--standalone", "--nproc-per-node", "2", "-m", "trainer", "--out", str(out),
            "--preset=tiny", "--steps=12", "--ckpt-every=6", "--log-every-s=0.05",
            "--log-every-steps=0"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, start_new_session=True, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:  # never leave workers behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, output[-3000:]
    assert validate_run(out) == []
    ranks = [read_jsonl(out / f"rank{r}.jsonl") for r in (0, 1)]
    assert [line["rank"] for line in ranks[1]] == [1] * len(ranks[1])
    assert [x["step"] for x in ranks[0]] == [x["step"] for x in ranks[1]] == [
        line["step"] for line in metrics(out)
    ]  # all ranks log the same steps
    assert ranks[0][-1]["step"] == 12
    assert all({"step_time_s", "data_wait_s", "elapsed_s"} <= line.keys() for line in ranks[1])
    assert sorted(p.name for p in (out / "ckpt").iterdir()) == ["step-12.pt", "step-6.pt"]
    assert not (out / "metrics1.jsonl").exists()
