"""app/read/ only reads (issue 22, item 4): no module under it runs a named query that writes,
opens a transaction, or holds SQL text that writes. The tile worker that writes chart tiles
lives beside diagnosis (app/tiler.py), the alert actions in app/alerts/actions.py.

Read statically, so a write that only some branch reaches is found too: every string in a
module that names a query file (``"read/tiles_roll_lines"``) is looked up in queries/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READ = ROOT / "app" / "read"
QUERIES = ROOT / "queries"
WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|MERGE|COPY|TRUNCATE|ATTACH)\b",
                    re.IGNORECASE)
NAME = re.compile(r"^[a-z0-9_]+(/[a-z0-9_]+)+$")  # how a query is named: "read/runs_tail"
TRANSACTIONS = {"begin", "commit", "rollback", "checkpoint"}


def sql_body(path: Path) -> str:
    """A query file without its ``--`` header and comments (a title may say "update")."""
    return "\n".join(line.split("--", 1)[0] for line in path.read_text().splitlines())


def writes_in(module: Path) -> list[str]:
    tree = ast.parse(module.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            query = QUERIES / f"{text}.sql"
            if NAME.match(text) and query.is_file() and WRITES.search(sql_body(query)):
                found.append(f"runs {text} ({WRITES.search(sql_body(query)).group(1)})")
            elif not NAME.match(text) and re.search(r"\b(INTO|TABLE|SET|FROM)\b", text) \
                    and WRITES.match(text.strip()):
                found.append(f"holds SQL that writes: {text.strip()[:40]!r}")
        elif isinstance(node, ast.Attribute) and node.attr in TRANSACTIONS \
                and isinstance(getattr(node, "ctx", None), ast.Load):
            found.append(f"calls .{node.attr}() (line {node.lineno})")
    return found


@pytest.mark.parametrize("module", sorted(READ.glob("*.py")), ids=lambda p: p.name)
def test_no_module_under_app_read_writes_to_the_database(module):
    assert writes_in(module) == [], f"app/read/{module.name} writes: move it out of app/read"


def test_the_check_sees_a_write():
    """The check itself can fail: the tile worker, which writes tiles, is caught by it."""
    found = writes_in(ROOT / "app" / "tiler.py")
    assert any("tiles_roll_lines" in f for f in found) and any(".commit()" in f for f in found)
