"""The keys of a ``[[rule]]`` table: which Rule attribute each fills, how its value is checked,
and what to write instead when it is wrong; and ``RuleType``, what each rule type's module
declares (its keys, how it reads, who judges it; rule_types.py lists them)::

    COMMON[4].convert("20 lines") -> {"for_s": 0.0, "for_lines": 20}
    COMMON[2].convert("run-[ab")  -> ValueError("'run-[ab' is not a valid glob: '[' at
                                                  position 5 has no closing ']'; ...")

(COMMON is ``common(type names)``, as rule_types.COMMON holds it.)
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..keys import GAP
from .duration import DurationTooLong, format_duration, parse_duration

SEVERITIES = ("critical", "warning", "info")
OPS = (">", ">=", "<", "<=")
DIRECTIONS = ("rise", "fall")
# what app/diagnose reports (diagnosis.KIND_RANK, but for two_writers: a finding, no alert)
KINDS = ("spike", "cliff", "stall", "nonfinite", "straggler", "divergence", "frozen", "crash")
_LINES = re.compile(r"\s*(\d+)\s*lines?\s*")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Field:
    key: str  # in the TOML table
    attr: str  # of Rule
    check: Callable[[object], object]  # the value to store; ValueError says what is wrong
    help: str  # what a good value looks like
    required: bool = False
    default: object = None  # the Rule attribute's when the key is left out (a type's own keys)

    def convert(self, raw: object) -> dict[str, object]:
        value = self.check(raw)
        return value if isinstance(value, dict) else {self.attr: value}  # `for` fills two

    def toml(self, value: object) -> str:
        """``value`` as this key is written in a rules file (a duration as "10m")."""
        if self.check in (duration_s, positive_duration_s):
            return toml_value(format_duration(value))
        return toml_value(value)


@dataclass(frozen=True)
class RuleType:
    """One rule type, declared in the module that judges it (rule_types.TYPES lists them).

    ``family`` says which part of a pass judges its rules: "lines" (each new line of a run:
    lines.py's walk, over this type's ``watched`` columns and its ``series``), "stall" (the
    timers of stall.py) or "incident" (what diagnosis stored: incident_rule.py)."""

    name: str
    family: str
    fields: tuple[Field, ...]  # its own keys, besides COMMON
    describe: Callable[[object, str], str]  # (rule, " for 20 lines" or "") -> "loss > 5 ..."
    checks: Callable[[dict, dict], list] = lambda table, values: []  # [(key, message)]
    watched: Callable | None = None  # lines: (rule, frame) -> the columns it looks at
    series: Callable | None = None  # lines: (rule, frame, column, active, window) -> Series
    summary: Callable | None = None  # lines: (rule, metric, step, value, typical, resolved)


def _kind_of(raw: object) -> str:
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "text",
             list: "a list", dict: "a table"}
    return names.get(type(raw), "a date or time")


def quoted_text(raw: object) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"must be text in quotes, not {_kind_of(raw)}")
    if not raw.strip():
        raise ValueError("is empty")
    return raw


# a stall's gap was stored as interval_s before migration 0024: a rules file written then
# still means the same metric, without an error
OLD_METRICS = {"interval_s": GAP}


def metric_name(raw: object) -> str:
    text = quoted_text(raw)
    return OLD_METRICS.get(text, text)


def metric_glob(raw: object) -> str:
    glob = glob_pattern(raw)
    return OLD_METRICS.get(glob, glob)


def _name(raw: object) -> str:
    if not _NAME.fullmatch(quoted_text(raw)):
        raise ValueError(f"{raw!r} may hold only letters, digits, '.', '_' and '-' (starting "
                         "with a letter or digit), so that `alerts silence NAME` can name it")
    return raw


def one_of(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(raw: object) -> str:
        if raw not in options:
            shown = quoted_text(raw) if isinstance(raw, str) else raw
            text = str(shown).lower()
            close = [o for o in options if sorted(o) == sorted(text)]  # "=>" is ">="
            close = close or difflib.get_close_matches(text, options, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"must be one of {', '.join(options)}; got {shown!r}{hint}")
        return raw

    return check


def glob_problem(pattern: str) -> str | None:
    """Why fnmatch would not read ``pattern`` the way it looks, or None."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            j += j < len(pattern) and pattern[j] == "!"
            j += j < len(pattern) and pattern[j] == "]"  # a leading ] is a literal member
            close = pattern.find("]", j)
            if close < 0:
                return (f"'[' at position {i + 1} has no closing ']'; write [[] to match a "
                        "literal '['")
            i = close + 1
        else:
            i += 1
    if re.search(r"\{[^}]*,[^}]*\}", pattern):
        return "{a,b} alternatives are not glob syntax here; write one rule per pattern"
    return None


def glob_pattern(raw: object) -> str:
    problem = glob_problem(quoted_text(raw))
    if problem:
        raise ValueError(f"{raw!r} is not a valid glob: {problem}")
    return raw


def list_of(check: Callable[[object], str], example: str) -> Callable[[object], tuple]:
    def convert(raw: object) -> tuple[str, ...]:
        if not isinstance(raw, list):
            raise ValueError(f"must be a list, e.g. {example}; not {_kind_of(raw)}")
        out = []
        for number, item in enumerate(raw, start=1):
            try:
                out.append(check(item))
            except ValueError as err:
                raise ValueError(f"item {number}: {err}") from None
        return tuple(out)

    return convert


def finite_number(raw: object) -> float:
    if isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+(\.\d*)?([eE][-+]?\d+)?\s*", raw):
        raise ValueError(f"must be a number, not the text {raw!r}; write it without quotes")
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"must be a number, not {_kind_of(raw)}")
    if not math.isfinite(raw):
        raise ValueError(f"must be a finite number, not {raw}")
    return float(raw)


def above(low: float, why: str) -> Callable[[object], float]:
    def check(raw: object) -> float:
        value = finite_number(raw)
        if value <= low:
            raise ValueError(f"must be more than {low:g} ({why}); got {value:g}")
        return value

    return check


def at_least(low: float, why: str) -> Callable[[object], float]:
    def check(raw: object) -> float:
        value = finite_number(raw)
        if value < low:
            raise ValueError(f"must be at least {low:g} ({why}); got {value:g}")
        return value

    return check


def lines_count(raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        finite_number(raw)  # says "not the text" when quoted
        raise ValueError(f"must be a whole number of lines, e.g. 20; got {raw!r}")
    if raw < 1:
        raise ValueError(f"must be at least 1 line; got {raw}")
    return raw


def duration_s(raw: object) -> float:
    return parse_duration(raw)  # its ValueError already says what is accepted


def positive_duration_s(raw: object) -> float:
    seconds = parse_duration(raw)
    if seconds <= 0:
        raise ValueError(f"must be longer than 0; got {raw!r}")
    return seconds


def _bool(raw: object) -> bool:
    if not isinstance(raw, bool):
        hint = "; write it without quotes" if str(raw).lower() in ("true", "false") else ""
        raise ValueError(f"must be true or false, not {raw!r}{hint}")
    return raw


def _for(raw: object) -> dict[str, object]:
    """`for` is a duration ("2m") or a count of lines ("20 lines"); a bare number would be
    ambiguous, so it is refused rather than guessed."""
    if isinstance(raw, str) and (m := _LINES.fullmatch(raw)):
        if int(m[1]) < 1:
            raise ValueError("must be at least 1 line; leave `for` out to fire at once")
        return {"for_s": 0.0, "for_lines": int(m[1])}
    bare_number = (isinstance(raw, (int, float)) and not isinstance(raw, bool)) or (
        isinstance(raw, str) and re.fullmatch(r"\s*\d+(\.\d+)?\s*", raw))
    if bare_number:
        raise ValueError(f"{raw!r} is ambiguous: write for = \"{raw}s\" for seconds or "
                         f"for = \"{raw} lines\" for lines")
    try:
        return {"for_s": parse_duration(raw), "for_lines": 0}
    except DurationTooLong:
        raise  # a duration, only too long: its own message says so
    except ValueError:
        raise ValueError(f"{raw!r} is neither a duration nor a number of lines; write e.g. "
                         "for = \"90s\", \"2m\", \"1h30m\" (units s, m, h, d) or "
                         "\"20 lines\"") from None


def held(rule) -> str:
    """What a rule's description says of its `for`: " for 20 lines", or "" (at once)."""
    text = for_text(rule.for_s, rule.for_lines)
    return f" for {text}" if text else ""


def for_text(for_s: float, for_lines: int) -> str | None:
    """What to write as `for`; None when the condition fires at once."""
    if for_lines:
        return f"{for_lines} line{'' if for_lines == 1 else 's'}"
    return format_duration(for_s) if for_s else None


def common(type_names: tuple[str, ...]) -> tuple[Field, ...]:
    """The keys every rule has; ``type`` is one of ``type_names`` (rule_types.TYPES)."""
    return (
        Field("name", "name", _name, 'a unique name, e.g. name = "loss-high"', True),
        Field("type", "type", one_of(type_names),
              f'one of {", ".join(type_names)}, e.g. type = "threshold"', True),
        Field("runs", "runs", glob_pattern, 'a glob on run names, e.g. runs = "gpt-*"'),
        Field("severity", "severity", one_of(SEVERITIES), 'severity = "critical"'),
        Field("for", "for_s", _for, 'for = "2m" or for = "20 lines"'),
        Field("repeat", "repeat_s", positive_duration_s, 'repeat = "4h"'),
        Field("notify_resolved", "notify_resolved", _bool, "notify_resolved = false"),
    )


def toml_value(value: object) -> str:
    """``value`` written as TOML (the types a Rule holds)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = "".join(_escape(c) for c in str(value))
    return f'"{escaped}"'


def _escape(c: str) -> str:
    if c in '"\\':
        return "\\" + c
    return f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
