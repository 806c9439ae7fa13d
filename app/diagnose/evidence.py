"""Where an evidence sentence comes from: whether the log itself says the thing happened
(``logged``) or cliffwatch concludes it (``inferred``), and from what. The sentence is stored
with it at its end, so an incident's evidence stays a list of strings::

    checkpoint at step 2000 blocked the training loop for 155.2 s, 2 lines before step 2029.
    (logged: events.jsonl)

and the report puts it next to the cause (``split``)::

    - checkpoint (logged: events.jsonl): checkpoint at step 2000 blocked the training loop ...

An event a reader derived from another trainer's log says so in its data (docs/formats.md):
``"inferred": true|false`` and ``"source": "folder checkpoint-500/ appeared at 12:03:11"``; our
own trainer's events.jsonl carries neither, and such an event is logged, in events.jsonl.
"""

from __future__ import annotations

import re

import pandas as pd

OWN_EVENTS = "events.jsonl"  # the source of an event that names none
_TAIL = re.compile(r" \((logged|inferred): ([^()]*(?:\([^()]*\)[^()]*)*)\)$")


MAX_PARTS = 2  # of a source made of several ("; "-joined log lines), the first ones quoted


def sourced(sentence: str, inferred: bool, source: str) -> str:
    """``sentence`` with where it comes from at its end; of a source that names many log
    lines (a resume's launch header, its loading lines, ...), the first MAX_PARTS and how many
    more, so the report stays readable."""
    parts = source.split("; ")
    if len(parts) > MAX_PARTS:
        source = f"{'; '.join(parts[:MAX_PARTS])} and {len(parts) - MAX_PARTS} more"
    return f"{sentence} ({'inferred' if inferred else 'logged'}: {source})"


def of_event(event: dict) -> tuple[bool, str]:
    """(inferred, source) of an event row (causes._events): a missing ``inferred`` is logged,
    a missing ``source`` our trainer's events.jsonl."""
    data = event.get("data") or {}
    return bool(data.get("inferred", False)), str(data.get("source") or OWN_EVENTS)


def split(sentence: str) -> tuple[str | None, str]:
    """("logged: events.jsonl", the sentence without it), or (None, sentence) for one that
    says nothing of its source (an older incident's, or ``unknown``'s)."""
    found = _TAIL.search(sentence)
    if found is None:
        return None, sentence
    return f"{found.group(1)}: {found.group(2)}", sentence[:found.start()]


def seconds(value: float) -> str:
    """167.2 s, 11.3 s, 0.021 s: short intervals keep their significant digits."""
    return f"{value:.1f} s" if abs(value) >= 1 else f"{value:.2g} s"


def lines_before(window: pd.DataFrame, step: int, incident) -> str:
    """How many logged lines came after ``step``, as "3 lines before step 2029"."""
    later = int((window["step"] > step).sum())
    return f"{later} line{'s' if later != 1 else ''} before step {incident.step}"
