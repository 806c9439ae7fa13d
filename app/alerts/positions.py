"""Where each ``[[rule]]`` table and each of its keys sits in a rules file.

tomllib returns values without positions, so this reads the raw text a line at a time, for a
file tomllib has already accepted::

    positions('[[rule]]  # disk\\nname = "a"\\nmetrics = [\\n  "x",\\n]\\n')
    -> Layout(rules=[Block(line=1, keys={"name": 2, "metrics": 3})], stray=[])

A value may run over several lines (an array, a triple-quoted string); lines inside it are
not keys. Only what the rules file needs is handled: ``key = value`` lines, comments, table
and array-of-tables headers. ``stray`` lists what lies outside any ``[[rule]]`` table as
(line, name, what) with ``what`` "key", "table" or "array of tables".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
_KEY_LINE = re.compile(rf"\s*(?P<path>{_KEY}(?:\s*\.\s*{_KEY})*)\s*=(?P<rest>.*)")
_HEADER = re.compile(r"\s*(?P<open>\[\[?)\s*(?P<name>[^\]]*?)\s*\]\]?\s*(?:#.*)?")


@dataclass
class Block:
    line: int  # of the [[rule]] header
    keys: dict[str, int] = field(default_factory=dict)  # key -> line


@dataclass
class Layout:
    rules: list[Block] = field(default_factory=list)
    stray: list[tuple[int, str, str]] = field(default_factory=list)


def positions(text: str) -> Layout:
    layout, section, carry = Layout(), None, None  # section: Block, "other", or None (top)
    # split on "\n" only, as tomllib counts lines (splitlines also breaks at U+2028 and others)
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw.removesuffix("\r")
        if carry is not None:  # inside a value that started on an earlier line
            carry = _value_end(raw, carry)
            continue
        header = _HEADER.fullmatch(raw)
        if header and not raw.lstrip().startswith("#"):
            section = _enter(layout, header, number)
            continue
        key = _KEY_LINE.match(raw)
        if key is None:
            continue
        name = _unquote(_first_part(key["path"]))
        if isinstance(section, Block):
            section.keys.setdefault(name, number)
        elif section is None:
            layout.stray.append((number, name, "key"))
        carry = _value_end(key["rest"], _Carry())
    return layout


def _enter(layout: Layout, header: re.Match, number: int) -> Block | str:
    name = _unquote(_first_part(header["name"]))
    array = header["open"] == "[["
    if name == "rule" and array and "." not in header["name"]:
        layout.rules.append(Block(number))
        return layout.rules[-1]
    if name == "rule" and layout.rules:  # [rule.sub]: a key of the last rule, holding a table
        sub = header["name"].split(".", 1)[1].strip()
        layout.rules[-1].keys.setdefault(_unquote(_first_part(sub)), number)
        return "other"
    layout.stray.append((number, header["name"], "array of tables" if array else "table"))
    return "other"


def _first_part(path: str) -> str:
    m = re.match(_KEY, path.strip())
    return m.group(0) if m else path.strip()


def _unquote(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'" else key


@dataclass
class _Carry:
    depth: int = 0  # open [ and {
    string: str | None = None  # the open triple quote, if any


def _value_end(text: str, state: _Carry) -> _Carry | None:
    """Reads one line of a value; returns the state to carry, or None when the value ended."""
    i = 0
    while i < len(text):
        if state.string:
            i = _close_multiline(text, i, state)
            continue
        c = text[i]
        if c == "#":
            break
        if text.startswith(('"""', "'''"), i):
            state.string, i = text[i : i + 3], i + 3
        elif c in "\"'":
            i = _close_string(text, i)
        else:
            state.depth += (c in "[{") - (c in "]}")
            i += 1
    return state if state.depth > 0 or state.string else None


def _close_multiline(text: str, i: int, state: _Carry) -> int:
    while i < len(text):
        if state.string == '"""' and text[i] == "\\":
            i += 2
        elif text.startswith(state.string, i):
            # a run of up to five quotes closes: the first ones belong to the content
            run = len(text[i:]) - len(text[i:].lstrip(state.string[0]))
            state.string = None
            return i + min(run, 5)
        else:
            i += 1
    return i


def _close_string(text: str, i: int) -> int:
    quote, i = text[i], i + 1
    while i < len(text) and text[i] != quote:
        i += 2 if quote == '"' and text[i] == "\\" else 1
    return i + 1
