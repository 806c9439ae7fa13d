"""What ``pip install .`` puts in site-packages (pyproject.toml holds the name, the
dependencies and the ``cliffwatch`` command).

A checkout keeps its top-level folders and runs as ``python -m app``. Installed, the same
folders become one package with the same layout inside it:

    cliffwatch/__init__.py, ...     from cliffwatch/ (the logging API, standard library only)
    cliffwatch/integrations/...     from cliffwatch/integrations/
    cliffwatch/app/...              from app/      (it imports itself relatively)
    cliffwatch/trainer/...          from trainer/  (likewise)
    cliffwatch/queries/**/*.sql     from queries/
    cliffwatch/samples/seed-cliff/  from samples/  (`cliffwatch demo` re-plays it)

so nothing generic (app, trainer, queries) lands in site-packages, and every path the code
computes from its own ``__file__`` (queries/ two folders above app/db/, the dashboard's pages,
the trainer's presets, the demo's sample) finds the same files in both. Folders and their
data files are found here rather than listed in pyproject.toml, so a new sub-package of app/
or a new .sql file is installed without anyone remembering to list it.
"""

import sys
from pathlib import Path

from setuptools import find_namespace_packages, setup

if "editable_wheel" in sys.argv:
    # an editable install would run the checkout's files as cliffwatch.app, but the dashboard's
    # pages name their package from the folder layout (app.dashboard there) and fail to import
    sys.exit("cliffwatch: `pip install -e .` is not supported: in a checkout run `python -m app`"
             " (or `make demo`), or install a copy with `pip install .`")

HERE = Path(__file__).parent
FOLDERS = ("app", "trainer", "queries")  # every sub-folder too, with the files in it


def data_of(folder: Path) -> list[str]:
    """The files beside a folder's modules (.sql, .toml, ...): setuptools copies only .py."""
    return sorted(p.name for p in folder.iterdir()
                  if p.is_file() and p.suffix not in (".py", ".pyc"))


# the logging API is the package itself: `pip install .` with no extra is it alone
packages = [name for name in find_namespace_packages(str(HERE), include=["cliffwatch",
                                                                        "cliffwatch.*"],
                                                     exclude=["*.__pycache__"])]
packages.append("cliffwatch.samples")
package_dir = {"cliffwatch": "cliffwatch", "cliffwatch.samples": "samples"}
package_data = {"cliffwatch.samples": ["seed-cliff/*"]}
for top in FOLDERS:
    package_dir[f"cliffwatch.{top}"] = top
    # namespace packages: folders without __init__.py (dashboard/views/, trainer/presets/,
    # queries/) are installed like the others instead of setuptools' "data directory" warning
    for name in find_namespace_packages(str(HERE), include=[top, f"{top}.*"],
                                        exclude=["*.__pycache__"]):
        packages.append(f"cliffwatch.{name}")
        package_data[f"cliffwatch.{name}"] = data_of(HERE / name.replace(".", "/"))

setup(packages=packages, package_dir=package_dir, package_data=package_data)
