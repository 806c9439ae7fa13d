"""Every third-party module the code imports is pinned (``==``) in the requirements file of the
image that runs it: app/ in requirements-app.txt, trainer/ in requirements.txt (which includes
requirements-app.txt). A module missing there works on a dev machine that happens to have it
and fails in a fresh install or the Docker image."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
import time
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"app", "trainer", "bench", "tests", "cliffwatch"}  # cliffwatch: the logging room
# optional packages pinned elsewhere: {module: (file, its pin)}; flash-attn builds against the
# GPU image's torch, so Dockerfile.gpu installs it and the trainer falls back to SDPA without it
ELSEWHERE = {"flash_attn": ("Dockerfile.gpu", "flash-attn==")}


def imported_modules(folder: Path) -> dict[str, str]:
    """{top-level module: a file importing it} for absolute imports anywhere in the folder's
    code, lazy ones inside functions included."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(folder)))
    return found


def third_party(modules: dict[str, str]) -> dict[str, str]:
    return {m: f for m, f in modules.items()
            if m not in sys.stdlib_module_names and m not in FIRST_PARTY
            and m != "__future__"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(requirements: Path) -> dict[str, str]:
    """{normalized distribution: the requirement line} of ``name==version`` lines, following
    ``-r other.txt``."""
    pins: dict[str, str] = {}
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r"):
            pins |= pinned(requirements.parent / line[2:].strip())
        elif line:
            name = re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]
            pins[normalized(name)] = line
    return pins


def unpinned(folder: str, requirements: str) -> list[str]:
    dists = packages_distributions()
    pins = pinned(ROOT / requirements)
    problems = []
    for module, where in sorted(third_party(imported_modules(ROOT / folder)).items()):
        if module in ELSEWHERE:
            file, pin = ELSEWHERE[module]
            if pin not in (ROOT / file).read_text():
                problems.append(f"{module} (imported by {folder}/{where}) is not pinned "
                                f"({pin}) in {file}")
            continue
        names = dists.get(module)
        if not names:
            problems.append(f"{module} (imported by {folder}/{where}) is not installed")
            continue
        lines = [pins.get(normalized(n)) for n in names]
        if not any(line and "==" in line for line in lines):
            problems.append(f"{module} (imported by {folder}/{where}; distribution "
                            f"{names[0]}) is not pinned with == in {requirements}")
    return problems


@pytest.mark.parametrize(("folder", "requirements"), [
    ("app", "requirements-app.txt"), ("trainer", "requirements.txt")])
def test_every_imported_package_is_pinned(folder, requirements):
    assert unpinned(folder, requirements) == []


def test_the_check_sees_lazy_imports_and_stdlib(tmp_path):
    code = tmp_path / "m.py"
    code.write_text("import os\nimport json.decoder\nfrom . import x\n"
                    "def f():\n    import numpy.linalg\n    from pyarrow import compute\n")
    assert sorted(third_party(imported_modules(tmp_path))) == ["numpy", "pyarrow"]


# what only following (watchdog), the server (streamlit, starlette, httpx) or the pages
# (altair, pandas' frames in app/read) need: a one-shot catch-up waits for none of them
LIVE_ONLY = ("watchdog", "streamlit", "starlette", "altair", "httpx", "pandas", "app.read",
             "app.server")
# what only other formats need (numpy: an event file's framing; pyarrow: logs parsed in
# Python): a JSONL log that DuckDB reads itself waits for neither (app/lazy.py)
OTHER_FORMATS = ("numpy", "pyarrow")
ONCE = """
import sys
from app.cli.main import main
code = main(["ingest", "--logdir", sys.argv[1], "--once"])
print(sorted({m.split(".")[0] if not m.startswith("app.") else ".".join(m.split(".")[:2])
              for m in sys.modules}))
raise SystemExit(code)
"""


def test_a_one_shot_catch_up_imports_nothing_only_live_tailing_needs(tmp_path):
    (tmp_path / "run").mkdir()  # big enough for the fast path (chunk.MIN_BYTES)
    (tmp_path / "run" / "metrics.jsonl").write_text(
        "".join(f'{{"step": {s}, "loss": {1 / (s + 1)}}}\n' for s in range(10_000)))
    done = subprocess.run([sys.executable, "-c", ONCE, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ingested 10000 rows" in done.stdout
    loaded = set(ast.literal_eval(done.stdout.splitlines()[-1]))
    assert loaded & set(LIVE_ONLY) == set()
    assert loaded & set(OTHER_FORMATS) == set()


def test_streamlit_still_has_the_polling_period_the_server_slows():
    """serve.quieter_streamlit_polling sets a private constant of Streamlit's: an upgrade that
    renames it would silently bring back 0.2 s polling (0.4% of a core when idle)."""
    from streamlit.watcher import polling_path_watcher

    assert isinstance(polling_path_watcher._POLLING_PERIOD_SECS, float)
    assert "_POLLING_PERIOD_SECS" in inspect.getsource(polling_path_watcher.PollingPathWatcher)


def test_a_one_shot_catch_up_of_an_event_file_imports_no_pandas(tmp_path):
    """pyarrow imports pandas on its first pa.array or to_numpy (0.35 s of one core holding
    the GIL, 41% of ingest --once on a 1,000,000-event file): the columns, their attempts and
    the evaluation rows are made by their buffers (app/ingest/arrays.py)."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(3000):
        writer.add_scalar("loss", 1 / (step + 1), step)
        writer.add_scalar("lr", 0.001, step)
        if step % 100 == 0:
            writer.add_scalar("eval/loss", 2 / (step + 1), step)
    writer.close()
    for written in (tmp_path / "run").iterdir():  # settled: its last step is read at once
        os.utime(written, (time.time() - 3600, time.time() - 3600))
    done = subprocess.run([sys.executable, "-c", ONCE, str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "ingested 3000 rows" in done.stdout, done.stdout
    loaded = set(ast.literal_eval(done.stdout.splitlines()[-1]))
    assert "pyarrow" in loaded and "pandas" not in loaded
