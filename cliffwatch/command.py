"""The ``cliffwatch`` command (and ``python -m cliffwatch``): the monitor, when it is installed.

``pip install cliffwatch`` is the logging API alone, with no dependency; the command then says
once what to install and exits 2::

    cliffwatch: the monitor needs its dependencies: pip install "cliffwatch[monitor]"
    (missing: duckdb, streamlit)

(one line on the terminal).
"""

from __future__ import annotations

import importlib.metadata as metadata
import re
import sys

NEEDS = 'the monitor needs its dependencies: pip install "cliffwatch[monitor]"'
CHECKOUT = "in a checkout the monitor runs as `python -m app` (cliffwatch/ is the logging API)"


def missing() -> list[str]:
    """The monitor extra's distributions that are not installed (none outside an install)."""
    try:
        required = metadata.requires("cliffwatch") or []
    except metadata.PackageNotFoundError:
        return []
    names = [re.match(r"[A-Za-z0-9_.-]+", spec).group() for spec in required
             if re.search(r"""extra\s*==\s*["']monitor["']""", spec)]
    absent = []
    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def say(text: str) -> int:
    print(f"cliffwatch: {text}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    absent = missing()
    if absent:
        return say(f"{NEEDS} (missing: {', '.join(sorted(absent))})")
    try:
        from .app.cli.main import main as monitor
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith(f"{__package__}.app"):
            return say(CHECKOUT)
        return say(f"{NEEDS} (missing: {exc.name})")
    return monitor(argv)
