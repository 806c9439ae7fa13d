"""`pip install .` into a fresh venv gives a `cliffwatch` command that works from any folder and
puts one top-level name, cliffwatch, in site-packages (setup.py says how); the logging API
alone (no extra) installs with no dependency at all.

Nothing is downloaded: the fresh venv sees this venv's site-packages through a .pth file (so
the dependencies, pip and setuptools are the ones already installed), and the project is built
with --no-build-isolation --no-deps --no-index from a copy of the checkout (a build writes
build/ and *.egg-info beside the sources).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port, wait_for

SOURCES = ("pyproject.toml", "setup.py", "README.md", "cliffwatch", "app", "trainer", "queries",
           "samples")
INSTALLED = ("app", "trainer", "queries")  # folders installed whole, as cliffwatch/<folder>
MONITOR_ONLY = {"streamlit", "duckdb", "pandas", "pyarrow"}  # never on a training machine
GENERIC = {"app", "trainer", "queries", "samples", "install", "tests", "bench"}


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the checkout must not be what the fresh venv imports."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return env | {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def run(argv: list, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=clean_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


def copy_sources(src: Path) -> Path:
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    return src


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv with the project installed from a copy at ``venv.parent / "src"``."""
    base = tmp_path_factory.mktemp("install")
    src = copy_sources(base / "src")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], base)
    python = venv / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       base).stdout.strip())
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (purelib / "_outer_venv.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--no-cache-dir", src], base)
    return venv


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def spiky_logs(folder: Path) -> Path:
    """One run whose loss jumps 30-fold at step 200 and nothing explains it."""
    run_dir = folder / "logs" / "spiky"
    run_dir.mkdir(parents=True)
    rows = [{"step": s, "elapsed_s": s * 0.5,
             "loss": 25.0 if 200 <= s < 203 else 0.5 + 2.0 * 0.99 ** s + 0.001 * (s % 7)}
            for s in range(300)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir.parent


def test_cliffwatch_command_works_from_another_folder(venv, tmp_path):
    cliffwatch = venv / "bin" / "cliffwatch"
    shown = run([cliffwatch, "--help"], tmp_path).stdout
    assert shown.startswith("usage: cliffwatch ")
    for command in ("serve", "ingest", "sql", "diagnose", "demo", "alerts"):
        assert command in shown
    found = json.loads(run([cliffwatch, "diagnose", spiky_logs(tmp_path), "--json"],
                           tmp_path).stdout)
    assert [(i["run"], i["kind"], i["metric"], i["step"]) for i in found] == [
        ("spiky", "spike", "loss", 200)]
    assert "serve" in run([venv / "bin" / "python", "-m", "cliffwatch", "--help"],
                          tmp_path).stdout


def test_site_packages_gets_one_top_level_name(venv, tmp_path):
    names = {p.name.split("-")[0] for p in site_packages(venv).iterdir()
             if p.name not in ("_outer_venv.pth", "__pycache__")}
    assert names & GENERIC == set()
    assert names == {"cliffwatch"}, names
    probe = "import importlib.util as u; print([n for n in %r if u.find_spec(n)])"
    assert run([venv / "bin" / "python", "-c", probe % sorted(GENERIC)], tmp_path).stdout \
        .strip() == "[]"


def files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_every_file_of_the_code_folders_is_installed(venv):
    """The .sql queries, the dashboard's pages, the trainer's presets and the demo's sample
    are found from ``__file__`` at run time; a file left out fails only when used."""
    src, package = venv.parent / "src", site_packages(venv) / "cliffwatch"
    for folder in INSTALLED:
        assert files(src / folder) - files(package / folder) == set(), folder
    assert files(src / "cliffwatch") - files(package) == set()  # the logging API is the root
    assert files(src / "samples" / "seed-cliff") == files(package / "samples" / "seed-cliff")


def test_demo_writes_into_the_logdir_it_was_given(venv, tmp_path):
    """`cliffwatch demo --logdir runs` from the user's folder: the writers it starts run in the
    package's folder (where `-m trainer` finds the trainer) and must still write to ./runs,
    the folder the server watches, not into site-packages."""
    with open(tmp_path / "demo.log", "w") as log:
        demo = subprocess.Popen([venv / "bin" / "cliffwatch", "demo", "--logdir", "runs",
                                 "--port", str(free_port())], cwd=tmp_path, env=clean_env(),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: demo.poll() is not None
                 or list((tmp_path / "runs").glob("seed-replay*/metrics.jsonl"))
                 or list(site_packages(venv).glob("cliffwatch/runs/seed-replay*")), 60, 0.2)
    finally:
        demo.send_signal(signal.SIGTERM)  # the demo stops its writers before it exits
        try:
            demo.wait(timeout=30)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
    assert not (site_packages(venv) / "cliffwatch" / "runs").exists()
    assert list((tmp_path / "runs").glob("seed-replay*/metrics.jsonl")), \
        (tmp_path / "demo.log").read_text()


PAGES = """
import sys
from pathlib import Path

from streamlit.testing.v1 import AppTest

import cliffwatch.app.dashboard as dashboard

main = Path(dashboard.__file__).with_name("main.py")
at = AppTest.from_file(str(main), default_timeout=60)
at.run()
for page in sorted((main.parent / "views").glob("*.py")):
    at.switch_page(f"views/{page.name}")
    at.run()
    assert not at.exception, (page.name, [e.message for e in at.exception])
print(sorted({m.split(".")[0] for m in sys.modules}))
"""


def test_dashboard_pages_import_the_installed_package(venv, tmp_path):
    """Streamlit runs each page as a script, outside any package: its relative imports must
    still reach cliffwatch.app, and nothing may load as a top-level app."""
    loaded = run([venv / "bin" / "python", "-c", PAGES], tmp_path).stdout.splitlines()[-1]
    assert "'cliffwatch'" in loaded
    assert not set(re.findall(r"'(\w+)'", loaded)) & GENERIC, loaded


def requirement_names(path: Path) -> dict[str, str]:
    """{normalized name: pinned version} of a requirements file, not following ``-r``."""
    pins = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


def lower_bounds(specs: list[str]) -> dict[str, str]:
    bounds = {}
    for spec in specs:
        name, version = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*>=\s*([\w.]+)", spec).groups()
        bounds[re.sub(r"[-_.]+", "-", name).lower()] = version
    return bounds


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


@pytest.mark.parametrize(("extra", "requirements"), [
    ("monitor", "requirements-app.txt"), ("trainer", "requirements.txt"),
    ("dev", "requirements-dev.txt")])
def test_declared_dependencies_follow_the_pinned_requirements(extra, requirements):
    """pyproject.toml names what each requirements file pins, each with a lower bound no
    newer than the pin (the pins are what make, CI and the image install and test)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = lower_bounds(project["optional-dependencies"][extra])
    pins = requirement_names(ROOT / requirements)
    assert sorted(declared) == sorted(pins)
    for name, bound in declared.items():
        assert version_tuple(bound) <= version_tuple(pins[name]), (name, bound, pins[name])


def test_the_base_install_depends_on_nothing():
    """`pip install cliffwatch` is the logging API: every dependency is in an extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == []
    assert set(lower_bounds(project["optional-dependencies"]["system"])) == \
        {"psutil", "nvidia-ml-py"}


@pytest.fixture(scope="module")
def logging_only(tmp_path_factory) -> Path:
    """A fresh venv that sees nothing of this one, with the wheel installed without extras.

    The wheel is built once from a copy of the checkout (this venv's pip and setuptools, no
    index); the fresh venv has no pip of its own: this venv's pip installs into it
    (`pip --python`), still with --no-index, so nothing can be downloaded or pulled in."""
    base = tmp_path_factory.mktemp("logging-only")
    src = copy_sources(base / "src")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--no-cache-dir", "-w", base / "dist", src], base)
    venv = base / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"python -m venv does not work here: {made.stderr.strip()}")
    wheel = next((base / "dist").glob("cliffwatch-*.whl"))
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
         "--quiet", "--no-index", "--no-cache-dir", wheel], base)
    return venv


USE_THE_API = """
import importlib.metadata as m, json, sys
import cliffwatch
run = cliffwatch.init(logdir="runs", name="alone", config={"lr": 0.1})
run.log({"loss": 0.5}, step=1)
with run.checkpoint(step=1):
    pass
run.finish()
print(json.dumps({"requires": m.requires("cliffwatch"), "file": cliffwatch.__file__,
                  "modules": sorted({n.split(".")[0] for n in sys.modules})}))
"""


def test_the_logging_api_alone_installs_without_the_monitors_dependencies(logging_only,
                                                                         tmp_path):
    python = logging_only / "bin" / "python"
    shown = json.loads(run([python, "-c", USE_THE_API], tmp_path).stdout)
    assert shown["file"].startswith(str(logging_only))
    # every requirement the package declares is behind an extra (the system one: psutil)
    assert all("extra ==" in spec for spec in shown["requires"]), shown["requires"]
    assert not set(shown["modules"]) & MONITOR_ONLY
    listed = run([sys.executable, "-m", "pip", "--python", python, "list", "--format=json"],
                 tmp_path).stdout
    installed = {row["name"].lower() for row in json.loads(listed)}
    assert installed & MONITOR_ONLY == set(), installed
    assert "cliffwatch" in installed
    events = (tmp_path / "runs" / "alone" / "events.jsonl").read_text()
    assert '"checkpoint_end"' in events and '"run_end"' in events


def test_the_command_without_the_monitor_says_what_to_install(logging_only, tmp_path):
    done = subprocess.run([logging_only / "bin" / "cliffwatch", "serve"], cwd=tmp_path,
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count('pip install "cliffwatch[monitor]"') == 1, done.stderr
    assert "Traceback" not in done.stderr


AHEAD = """
import sys, time
from pathlib import Path
from cliffwatch.app.ingest.formats import ahead, tfevents

path = Path(sys.argv[1])
data = path.read_bytes()
ahead.start(path.parent, len(data), least=1)
got = ahead.take(data, 0)
print(got is not None and got.consumed == tfevents.decoded(data, 0).consumed
      and len(got.found.step) == len(tfevents.decoded(data, 0).found.step))
ahead.finish()
"""


def test_the_installed_package_decodes_event_files_ahead(venv, tmp_path):
    """Installed, the second process (`python -m` of the module, run from the package) starts,
    decodes and answers: a module or file it needs that is not installed would leave the
    tailer to decode alone, silently slower."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(500):
        writer.add_scalar("loss", 1 / (step + 1), step)
    writer.close()
    (event,) = (tmp_path / "run").glob("events.out.tfevents.*")
    assert run([venv / "bin" / "python", "-c", AHEAD, event], tmp_path).stdout.strip() == "True"
