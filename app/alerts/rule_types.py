"""The table of rule types: each is declared once, in the module that judges it, with its
keys, how it reads and its judging; this table only lists them::

    TYPES["threshold"].fields    -> (Field("metric", ...), Field("op", ...), Field("value", ...))
    TYPES["stall"].family        -> "stall"
    COMMON                       -> the keys every rule has (name, type, runs, ...)

A new type judged line by line is one more ``RuleType`` in lines.py's ``RULE_TYPES``: its keys
(the Rule attributes they fill come from them), its description, its series; nothing else
changes.
"""

from __future__ import annotations

import difflib

from . import incident_rule, lines, stall
from .fields import Field, RuleType, common

TYPES: dict[str, RuleType] = {
    t.name: t for t in (*lines.RULE_TYPES, stall.RULE_TYPE, incident_rule.RULE_TYPE)}
COMMON = common(tuple(TYPES))
ALL_KEYS = {f.key for f in COMMON} | {f.key for t in TYPES.values() for f in t.fields}


def fields_of(rule_type: object) -> tuple[Field, ...]:
    """The keys a rule of ``rule_type`` may have (COMMON alone for an unknown type)."""
    found = TYPES.get(rule_type) if isinstance(rule_type, str) else None
    return COMMON + found.fields if found else COMMON


def type_attributes() -> list[tuple[str, object]]:
    """(Rule attribute, default) of every type's own keys, in table order, each once."""
    seen: dict[str, object] = {}
    for rule_type in TYPES.values():
        for spec in rule_type.fields:
            seen.setdefault(spec.attr, spec.default)
    return list(seen.items())


def unknown_key_message(key: str, rule_type: object, fields: tuple[Field, ...]) -> str:
    keys = [f.key for f in fields]
    owners = [name for name, t in TYPES.items() if any(f.key == key for f in t.fields)]
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


