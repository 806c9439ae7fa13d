"""Durations as people write them in rules files and on the command line::

    parse_duration("2h30m") -> 9000.0     parse_duration(90) -> 90.0
    parse_duration("1.5s")  -> 1.5        format_duration(9000) -> "2h30m"

Units are s, m, h and d, largest first, each at most once; a bare number means seconds.
At most MAX_S (365 days): a longer one is refused (``DurationTooLong``), since a silence
``"for": 99999999999999999999999`` ended past what a clock or a date can show.
"""

from __future__ import annotations

import math
import re

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
ACCEPTED = (
    "use a number with a unit s, m, h or d, largest first, e.g. '90s', '10m', '4h', '2h30m', "
    "'1d' (a bare number means seconds)"
)
MAX_S = 365 * 86400.0  # a year: longer than any silence, repeat or budget a person means
_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"({_NUMBER})\s*([a-zA-Z]+)\s*")


class DurationTooLong(ValueError):
    """A well-formed duration past MAX_S; its message names the limit."""


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``text``; ValueError whose message says what is accepted."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        shown = str(text).lower() if isinstance(text, bool) else repr(text)  # as TOML writes it
        raise ValueError(f"{shown} is not a duration; {ACCEPTED}")
    if isinstance(text, int):  # JSON and TOML give any size of int: float() may overflow
        return _checked(float(max(-1, min(text, MAX_S + 1))), _shown(text))
    if not isinstance(text, str):
        return _checked(float(text), _shown(text))
    s = text.strip()
    if not s:
        raise ValueError(f"the duration is empty; {ACCEPTED}")
    if s.startswith("-"):
        raise ValueError(f"{text!r} is negative; a duration must be 0 or more")
    seconds = float(s) if re.fullmatch(_NUMBER, s) else _parse_parts(s, text)
    # 400 digits overflow to inf: that is too long, not "not finite"
    return _checked(min(seconds, MAX_S + 1), _shown(text))


def _parse_parts(s: str, text: str) -> float:
    total, pos, last = 0.0, 0, -1
    order = list(UNITS)
    while pos < len(s):
        m = _PART.match(s, pos)
        if not m:
            raise ValueError(f"{text!r} is not a duration; {ACCEPTED}")
        number, unit = m.groups()
        if unit not in UNITS:
            raise ValueError(f"{text!r} has the unknown unit {unit!r}; {ACCEPTED}")
        if order.index(unit) <= last:
            raise ValueError(f"{text!r} repeats a unit or puts a smaller one first; {ACCEPTED}")
        last = order.index(unit)
        total += float(number) * UNITS[unit]
        pos = m.end()
    return total


def _shown(text: str | int | float) -> str:
    """``text`` as a message quotes it: 40 characters at most (a 400-digit number is not
    worth echoing)."""
    shown = repr(text)
    return shown if len(shown) <= 40 else shown[:39] + "…"


def _checked(seconds: float, shown: str) -> float:
    if not math.isfinite(seconds):
        raise ValueError(f"{shown} is not a finite duration; {ACCEPTED}")
    if seconds < 0:
        raise ValueError(f"{shown} is negative; a duration must be 0 or more")
    if seconds > MAX_S:
        raise DurationTooLong(f"{shown} is longer than a year, the longest duration accepted; "
                              f"give {format_duration(MAX_S)} or less")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest text ``parse_duration`` reads back as ``seconds``: 9000 -> "2h30m"."""
    if seconds != int(seconds) or seconds == 0:
        return f"{seconds:g}s"
    rest, out = int(seconds), ""
    for unit, size in UNITS.items():
        count, rest = divmod(rest, int(size))
        if count:
            out += f"{count}{unit}"
    return out
