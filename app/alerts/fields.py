"""The keys of a ``[[rule]]`` table: which Rule attribute each fills, how its value is checked,
and what to write instead when it is wrong::

    COMMON[4].convert("20 lines") -> {"for_s": 0.0, "for_lines": 20}
    COMMON[2].convert("run-[ab")  -> ValueError("'run-[ab' is not a valid glob: '[' at
                                                  position 5 has no closing ']'; ...")
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

    def convert(self, raw: object) -> dict[str, object]:
        value = self.check(raw)
        return value if isinstance(value, dict) else {self.attr: value}  # `for` fills two


def _kind_of(raw: object) -> str:
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "text",
             list: "a list", dict: "a table"}
    return names.get(type(raw), "a date or time")


def _text(raw: object) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"must be text in quotes, not {_kind_of(raw)}")
    if not raw.strip():
        raise ValueError("is empty")
    return raw


# a stall's gap was stored as interval_s before migration 0024: a rules file written then
# still means the same metric, without an error
OLD_METRICS = {"interval_s": GAP}


def _metric(raw: object) -> str:
    text = _text(raw)
    return OLD_METRICS.get(text, text)


def _metric_glob(raw: object) -> str:
    glob = _glob(raw)
    return OLD_METRICS.get(glob, glob)


def _name(raw: object) -> str:
    if not _NAME.fullmatch(_text(raw)):
        raise ValueError(f"{raw!r} may hold only letters, digits, '.', '_' and '-' (starting "
                         "with a letter or digit), so that `alerts silence NAME` can name it")
    return raw


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(raw: object) -> str:
        if raw not in options:
            shown = _text(raw) if isinstance(raw, str) else raw
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


def _glob(raw: object) -> str:
    problem = glob_problem(_text(raw))
    if problem:
        raise ValueError(f"{raw!r} is not a valid glob: {problem}")
    return raw


def _list_of(check: Callable[[object], str], example: str) -> Callable[[object], tuple]:
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


def _kinds(raw: object) -> tuple[str, ...]:
    kinds = _list_of(_choice(KINDS), '["spike", "cliff"]')(raw)
    if not kinds:
        raise ValueError(f"is empty; list some of {', '.join(KINDS)}")
    return kinds


def _number(raw: object) -> float:
    if isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+(\.\d*)?([eE][-+]?\d+)?\s*", raw):
        raise ValueError(f"must be a number, not the text {raw!r}; write it without quotes")
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"must be a number, not {_kind_of(raw)}")
    if not math.isfinite(raw):
        raise ValueError(f"must be a finite number, not {raw}")
    return float(raw)


def _above(low: float, why: str) -> Callable[[object], float]:
    def check(raw: object) -> float:
        value = _number(raw)
        if value <= low:
            raise ValueError(f"must be more than {low:g} ({why}); got {value:g}")
        return value

    return check


def _at_least(low: float, why: str) -> Callable[[object], float]:
    def check(raw: object) -> float:
        value = _number(raw)
        if value < low:
            raise ValueError(f"must be at least {low:g} ({why}); got {value:g}")
        return value

    return check


def _window(raw: object) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        _number(raw)  # says "not the text" when quoted
        raise ValueError(f"must be a whole number of lines, e.g. 20; got {raw!r}")
    if raw < 1:
        raise ValueError(f"must be at least 1 line; got {raw}")
    return raw


def _duration(raw: object) -> float:
    return parse_duration(raw)  # its ValueError already says what is accepted


def _positive_duration(raw: object) -> float:
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


def for_text(for_s: float, for_lines: int) -> str | None:
    """What to write as `for`; None when the condition fires at once."""
    if for_lines:
        return f"{for_lines} line{'' if for_lines == 1 else 's'}"
    return format_duration(for_s) if for_s else None


METRIC = Field("metric", "metric", _metric, 'the metric to watch, e.g. metric = "loss"', True)
COMMON = (
    Field("name", "name", _name, 'a unique name, e.g. name = "loss-high"', True),
    Field("type", "type", _choice(("threshold", "change", "nonfinite", "stall", "incident")),
          'one of threshold, change, nonfinite, stall, incident, e.g. type = "threshold"', True),
    Field("runs", "runs", _glob, 'a glob on run names, e.g. runs = "gpt-*"'),
    Field("severity", "severity", _choice(SEVERITIES), 'severity = "critical"'),
    Field("for", "for_s", _for, 'for = "2m" or for = "20 lines"'),
    Field("repeat", "repeat_s", _positive_duration, 'repeat = "4h"'),
    Field("notify_resolved", "notify_resolved", _bool, "notify_resolved = false"),
)
TYPES: dict[str, tuple[Field, ...]] = {
    "threshold": (
        METRIC,
        Field("op", "op", _choice(OPS), 'one of >, >=, <, <=, e.g. op = ">"', True),
        Field("value", "value", _number, "the number to compare with, e.g. value = 5", True),
    ),
    "change": (
        METRIC,
        Field("direction", "direction", _choice(DIRECTIONS),
              'direction = "rise" or direction = "fall"', True),
        Field("factor", "factor", _above(1, "a factor of 2 means twice or half the median"),
              "factor = 2"),
        Field("fraction", "fraction", _above(0, "0.4 means 40% from the median"),
              "fraction = 0.4"),
        Field("window", "window", _window, "window = 20 (lines in the trailing median)"),
    ),
    "nonfinite": (
        Field("metrics", "metrics", _list_of(_metric_glob, '["loss", "grad_*"]'),
              'metrics = ["loss", "grad_*"] (default every metric)'),
    ),
    "stall": (
        Field("factor", "stall_factor", _at_least(1, "times the run's typical interval"),
              "factor = 10"),
        Field("min", "min_s", _duration, 'min = "60s"'),
        Field("checkpoint_budget", "checkpoint_budget_s", _positive_duration,
              'checkpoint_budget = "10m"'),
    ),
    "incident": (
        Field("kinds", "kinds", _kinds, f"kinds = {list(KINDS[:3])}".replace("'", '"')),
    ),
}
ALL_KEYS = {f.key for f in COMMON} | {f.key for fields in TYPES.values() for f in fields}


def unknown_key_message(key: str, rule_type: object, fields: tuple[Field, ...]) -> str:
    keys = [f.key for f in fields]
    owners = [t for t, fs in TYPES.items() if any(f.key == key for f in fs)]
    # the Rule attribute written instead of its key (`repeat_s` for `repeat`)
    spec = next((f for f in fields if f.attr == key != f.key), None)
    if spec is None and key == "for_lines":
        spec = COMMON[4]
    if spec is not None:
        return f"unknown key; write {spec.key!r} instead, e.g. {spec.help}"
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.7)
    if owners:  # a key of another type (the caller knows this rule's type is valid)
        owned = f"is a key of type {' and '.join(owners)}, not of type {rule_type!r}"
        return f"{owned}; did you mean {close[0]!r}?" if close else (
            f"{owned}; keys of {rule_type}: {', '.join(keys)}")
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; the keys here are {', '.join(keys)}"


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
