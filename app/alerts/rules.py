"""Alert rules: what to watch in a run and when to speak (docs/alerts.md, "Rules").

A rules file is TOML, one ``[[rule]]`` table per rule::

    [[rule]]
    name = "loss-high"
    type = "threshold"
    metric = "loss"
    op = ">"
    value = 5
    for = "20 lines"

    load_rules(Path("alerts.toml"), logdir) -> ([Rule(name="loss-high", type="threshold",
        metric="loss", op=">", value=5.0, for_lines=20, line=1, ...)], "alerts.toml (1 rule)")

``check_file`` names the line and key of every mistake in one pass::

    alerts.toml:5: rule 'loss-high': field 'op': must be one of >, >=, <, <=; got '=>' ...
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..command import COMMAND
from ..errors import CliffwatchError
from .duration import parse_duration
from .fields import Field, for_text, held, toml_value
from .positions import Block, Layout, positions
from .rule_types import ALL_KEYS, TYPES, fields_of, type_attributes, unknown_key_message

__all__ = ["Rule", "RuleProblem", "check_file", "default_rules", "describe", "load_rules",
           "parse_duration", "parse_rules", "read_rules", "rules_path", "to_toml"]


@dataclass(frozen=True)
class RuleKeys:
    """What every rule has; ``Rule`` adds each type's own keys (rule_types.TYPES)."""

    name: str
    type: str  # a name in rule_types.TYPES: threshold | change | nonfinite | stall | incident
    runs: str = "*"  # glob on run names (fnmatch.fnmatchcase)
    severity: str = "warning"  # critical | warning | info
    for_s: float = 0.0  # condition must hold this long (seconds) ...
    for_lines: int = 0  # ... or this many lines (at most one of the two is non-zero)
    repeat_s: float = 4 * 3600.0
    notify_resolved: bool = True


# A rule: RuleKeys, then every type's own keys as attributes with their defaults (a threshold's
# metric, op and value; a stall's stall_factor, min_s and checkpoint_budget_s: each declared
# with its type), then the line of its [[rule]] table in the file (0 for built-ins). Built from
# the table so that a new type's keys are written once, where the type is.
Rule = dataclasses.make_dataclass(
    "Rule", [*((attr, object, dataclasses.field(default=default))
               for attr, default in type_attributes()),
             ("line", int, dataclasses.field(default=0))],
    bases=(RuleKeys,), frozen=True)
Rule.__module__ = __name__


@dataclass(frozen=True)
class RuleProblem:
    line: int  # 1-based; 0 when the problem is the file itself (missing, unreadable)
    rule: str | None  # the rule's name, when it has a usable one
    field: str | None  # the TOML key at fault
    message: str
    file: str = "alerts.toml"

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        rule = f" rule {self.rule!r}:" if self.rule else ""
        field = f" field {self.field!r}:" if self.field else ""
        return f"{where}:{rule}{field} {self.message}"


def default_rules() -> list[Rule]:
    """Used when there is no rules file: the failures nobody wants to learn of late."""
    return [
        Rule(name="stall", type="stall", severity="critical", stall_factor=10.0, min_s=60.0),
        Rule(name="nonfinite", type="nonfinite", severity="critical"),
        Rule(name="incident", type="incident"),  # its kinds: Rule's default
    ]


def load_rules(path: Path | None, logdir: Path) -> tuple[list[Rule], str]:
    """The rules in force and where they came from ("runs/alerts.toml (3 rules)")."""
    path = rules_path(path, logdir)
    if path is None:
        return default_rules(), "built-in rules"
    rules, problems = read_rules(path)
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise CliffwatchError(
            f"the rules file {path} has {_count(len(problems), 'problem')}:\n{listed}\n"
            f"Fix the file (`{COMMAND} alerts check {path}` checks it without a server), "
            f"or point --rules (CLIFFWATCH_RULES) at another file.")
    return rules, f"{path} ({_count(len(rules), 'rule')})"


def rules_path(path: Path | str | None, logdir: Path) -> Path | None:
    """The rules file in force: ``path`` (--rules) if given, else LOGDIR/alerts.toml if it
    exists, else None (the built-in rules)."""
    if path is not None and str(path) != "":
        return Path(path)
    candidate = Path(logdir) / "alerts.toml"
    return candidate if candidate.exists() else None


def check_file(path: Path) -> list[RuleProblem]:
    """Every mistake in the rules file at ``path``; empty when it is good."""
    return read_rules(Path(path))[1]


def read_rules(path: Path) -> tuple[list[Rule], list[RuleProblem]]:
    text, problem = _read_text(path)
    if problem:
        return [], [problem]
    return parse_rules(text, str(path))


def parse_rules(text: str, file: str = "alerts.toml") -> tuple[list[Rule], list[RuleProblem]]:
    """Rules and problems from the text of a rules file; ``file`` names it in messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        return [], [_syntax_problem(str(err), text, file)]
    layout = positions(text)
    problems = _stray_problems(data, layout, file)
    # with any [[rule]] header tomllib guarantees a list of tables; without one, `rule` is a
    # `[rule]` table or a `rule = ...` key, both reported as stray above
    tables = data["rule"] if layout.rules else []
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    blocks = layout.rules + [Block(0)] * (len(tables) - len(layout.rules))  # never short
    for table, block in zip(tables, blocks, strict=False):
        rule, found = _build(table, block, file)
        found += _duplicate(table, block, seen, file)
        problems += found
        if rule is not None and not found:
            rules.append(rule)
    problems.sort(key=lambda p: p.line)
    return rules, problems


MAX_RULES_BYTES = 1024 * 1024


class _NotRegular(Exception):
    pass


class _TooBig(Exception):
    pass


def _read_regular(path: Path) -> bytes:
    """The file's bytes, if it is a regular file of sane size: a FIFO named alerts.toml must
    not hang the server's start, nor a link to /dev/zero fill its memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(info.st_mode):
            raise _NotRegular
        if info.st_size > MAX_RULES_BYTES:
            raise _TooBig
        return os.read(fd, MAX_RULES_BYTES + 1)
    finally:
        os.close(fd)


def _read_text(path: Path) -> tuple[str, RuleProblem | None]:
    def problem(message: str, line: int = 0) -> tuple[str, RuleProblem]:
        return "", RuleProblem(line, None, None, message, str(path))

    try:
        data = _read_regular(path)
    except _NotRegular:
        return problem("is not a regular file (a FIFO or device?); give the path of a rules "
                       "file")
    except _TooBig:
        return problem(f"is over {MAX_RULES_BYTES // 1024} KiB; a rules file is a few rules")
    except FileNotFoundError:
        return problem("no such file; give the path of a rules file (see docs/alerts.md)")
    except IsADirectoryError:
        return problem("is a folder; give the path of a rules file such as LOGDIR/alerts.toml")
    except OSError as err:
        return problem(f"cannot be read ({err.strerror}); check its permissions")
    try:
        return data.decode("utf-8-sig"), None  # editors on Windows may write a BOM
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        return problem("is not UTF-8 text; save the file as UTF-8", line)


def _syntax_problem(message: str, text: str, file: str) -> RuleProblem:
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if m:
        line, message = int(m[1]), f"{message[: m.start()]} (column {m[2]})"
    else:
        line = text.rstrip("\n").count("\n") + 1
        message = re.sub(r"\s*\(at end of document\)$", " at the end of the file", message)
    if message.startswith("Invalid value"):
        message += "; text values need quotes, e.g. op = \">\", for = \"2m\""
    return RuleProblem(line, None, None, f"TOML syntax error: {message}", file)


def _stray_problems(data: dict, layout: Layout, file: str) -> list[RuleProblem]:
    out = []
    for line, name, what in layout.stray:
        if what == "key" and name == "rule":
            message = "write each rule as a [[rule]] table; `rule = ...` is not read"
        elif what == "key":
            message = (f"key {name!r} is outside any [[rule]] table; "
                       "start each rule with a [[rule]] line and put its keys below it")
        elif name == "rule":
            message = "write [[rule]] with two brackets: each rule is one entry of a list"
        else:
            message = (f"unknown {what} [{name}]; a rules file holds only [[rule]] tables"
                       + (" (did you mean [[rule]]?)" if name.lower().startswith("rule") else ""))
        out.append(RuleProblem(line, None, None, message, file))
    if not layout.stray and any(key != "rule" for key in data):  # not found by the scanner
        out.append(RuleProblem(1, None, None, "the file holds something other than [[rule]] "
                               "tables; a rules file holds only [[rule]] tables", file))
    return out


def _build(table: dict, block: Block, file: str) -> tuple[Rule | None, list[RuleProblem]]:
    """One [[rule]] table to a Rule, or the problems that stop it."""
    label = _label(table)
    rule_type = table.get("type")
    fields = fields_of(rule_type)
    known = {f.key: f for f in fields}
    problems: list[RuleProblem] = []

    def problem(key: str | None, message: str) -> None:
        line = block.keys.get(key, block.line) if key else block.line
        problems.append(RuleProblem(line, label, key, message, file))

    values: dict[str, object] = {}
    for key, raw in table.items():
        spec = known.get(key)
        if spec is None:
            if rule_type in TYPES or key not in ALL_KEYS:  # else: the type is at fault
                problem(key, unknown_key_message(key, rule_type, fields))
            continue
        try:
            values.update(spec.convert(raw))
        except ValueError as err:
            problem(key, str(err))
    for spec in fields:
        if spec.required and spec.key not in table:
            problem(spec.key, f"is missing; {spec.help}")
    for key, message in _cross_checks(rule_type, table, values):
        problem(key, message)
    if problems:
        return None, problems
    return Rule(line=block.line, **values), []


def _cross_checks(rule_type, table: dict, values: dict) -> list[tuple[str | None, str]]:
    found = TYPES.get(rule_type) if isinstance(rule_type, str) else None
    return found.checks(table, values) if found else []


def _duplicate(table: dict, block: Block, seen: dict[str, int], file: str) -> list[RuleProblem]:
    name = table.get("name")
    if not isinstance(name, str):
        return []
    line = block.keys.get("name", block.line)
    if name in seen:
        return [RuleProblem(line, name, "name", f"is already the name of the rule at line "
                            f"{seen[name]}; give each rule its own name", file)]
    seen[name] = block.line
    return []


def _label(table: dict) -> str | None:
    name = table.get("name")
    return name if isinstance(name, str) and name.strip() else None


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def to_toml(rules: list[Rule]) -> str:
    """A rules file that loads back to ``rules`` (lines aside); defaults are left out."""
    defaults = {f.name: f.default for f in dataclasses.fields(Rule)}
    chunks = []
    for rule in rules:
        lines = ["[[rule]]"]
        for spec in fields_of(rule.type):
            value = _toml_field(rule, spec, defaults)
            if value is not None:
                lines.append(f"{spec.key} = {value}")
        chunks.append("\n".join(lines) + "\n")
    return "\n".join(chunks)


def _toml_field(rule: Rule, spec: Field, defaults: dict) -> str | None:
    if spec.key == "for":
        text = for_text(rule.for_s, rule.for_lines)
        return None if text is None else toml_value(text)
    value = getattr(rule, spec.attr)
    if value == defaults[spec.attr] and not spec.required:
        return None
    return spec.toml(value)


def describe(rule: Rule) -> str:
    """One plain line saying when the rule fires: "loss > 5 for 20 lines"."""
    return TYPES[rule.type].describe(rule, held(rule))
