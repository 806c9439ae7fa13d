"""app/alerts/ stays a house a newcomer can change (issue 22): no class in it holds more than
about 15 methods (the engine's pass was 18: it is split by question into new_lines.py,
line_judge.py and timers.py), and the module map at the top of app/alerts/__init__.py names
every module there, each once, and no module that is gone.

Read statically: a class's methods are the functions defined in its body, properties included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import app.alerts

ALERTS = Path(app.alerts.__file__).parent
MOST = 15  # methods in one class (docs/architecture.md; /work/shared/style.md: "about 15")
MAPPED = re.compile(r"^ {4}([a-z_]+\.py) ", re.MULTILINE)  # "    engine.py        What ..."


def method_counts(module: Path) -> dict[str, int]:
    tree = ast.parse(module.read_text(), str(module))
    return {node.name: sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                           for n in node.body)
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


@pytest.mark.parametrize("module", sorted(ALERTS.glob("*.py")), ids=lambda p: p.name)
def test_no_class_in_app_alerts_holds_more_than_about_15_methods(module):
    big = {name: n for name, n in method_counts(module).items() if n > MOST}
    assert big == {}, f"app/alerts/{module.name}: split by question: {big}"


def test_the_engine_answers_one_question_per_part():
    """The pass itself stays small: what it judges lives in the modules it calls."""
    assert method_counts(ALERTS / "engine.py")["Engine"] <= 13


def test_the_count_sees_a_big_class(tmp_path):
    """The check itself can fail: a class of 16 methods is counted as 16."""
    body = "".join(f"    def m{i}(self):\n        pass\n" for i in range(16))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}")
    assert method_counts(tmp_path / "big.py") == {"Big": 16}


def test_the_module_map_names_every_module_once():
    mapped = MAPPED.findall(app.alerts.__doc__)
    modules = sorted(p.name for p in ALERTS.glob("*.py") if p.name != "__init__.py")
    assert sorted(mapped) == modules, (
        f"app/alerts/__init__.py's map: missing {sorted(set(modules) - set(mapped))}, "
        f"gone {sorted(set(mapped) - set(modules))}, twice "
        f"{sorted({m for m in mapped if mapped.count(m) > 1})}")
