"""What changes alerts from outside the rules: a silence added or ended, a test message
queued. The Alerts page, ``/api/alerts`` and ``alerts silence|unsilence|test`` all come here
(what they read is app/read/alerts.py's)::

    silence(state, "stall", "gpt-*", 7200.0, "known")   -> 3   (the silence's id)
    unsilence(state, 3)                                 -> {"id": 3, "ended_time": ...}
    send_test(state)                                    -> 12  (notification id;
                                       read.alerts.test_results(state, 12) says how each
                                       webhook answered)
"""

from __future__ import annotations

import time
import uuid
from fnmatch import fnmatchcase

import orjson

from ..command import COMMAND
from ..db import queries
from ..errors import CliffwatchError
from .duration import MAX_S, format_duration, parse_duration
from .fields import glob_problem
from .overview import active_rules
from .overview import rows as cursor_rows

SILENCE_KEYS = ("rule", "run", "for", "comment")
SILENCE_HELP = ('send {"rule": "GLOB", "run": "GLOB", "for": "2h", "comment": "why"} as JSON '
                "(run and comment optional)")
COMMENT_MAX = 500


def silence_fields(payload: dict) -> tuple[str, str, float, str | None]:
    """(rule, run, seconds, comment) from the API's JSON object, each checked."""
    unknown = sorted(set(payload) - set(SILENCE_KEYS))
    if unknown:
        raise CliffwatchError(f"unknown field(s) {', '.join(unknown)}; {SILENCE_HELP}")
    rule, run, comment = payload.get("rule"), payload.get("run", "*"), payload.get("comment")
    check_globs(rule, run)
    try:
        seconds = parse_duration(payload.get("for", ""))
    except ValueError as exc:
        raise CliffwatchError(f"for: {exc}") from None
    check_silence(rule, run, seconds, comment)
    return rule, run, seconds, comment


def check_globs(rule, run) -> None:
    for name, glob in (("rule", rule), ("run", run)):
        if not isinstance(glob, str) or not glob:
            raise CliffwatchError(f"{name} must be a glob such as 'stall' or 'gpt-*'; "
                                  f"{SILENCE_HELP}")
        problem = glob_problem(glob)
        if problem:
            raise CliffwatchError(f"{name} {glob!r} is not a valid glob: {problem}")


def check_silence(rule, run, seconds: float, comment) -> None:
    """What a silence must be, from the API or the Alerts page alike."""
    check_globs(rule, run)
    if seconds <= 0:
        raise CliffwatchError("for must be longer than 0, e.g. \"2h\"; to end a silence use "
                              "`alerts unsilence ID`")
    if not seconds <= MAX_S:  # the Alerts page and Python callers pass seconds themselves
        raise CliffwatchError(f"for must be at most {format_duration(MAX_S)} (a year); silence "
                              "again when it ends")
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX):
        raise CliffwatchError(f"comment must be text of at most {COMMENT_MAX} characters")


def add_silence(state, rule: str, run: str, duration_s: float, comment: str | None) -> dict:
    """The new silence's row plus ``until`` and the rule names it ``matches``."""
    check_silence(rule, run, duration_s, comment)
    names = [r.name for r in active_rules(state)[0]]
    matches = [name for name in names if fnmatchcase(name, rule)]
    if not matches:
        raise CliffwatchError(f"no rule matches {rule!r}; the rules are: "
                              f"{', '.join(names)} (`{COMMAND} alerts list`)")
    now = time.time()
    row = rows(state, "alerts/api_silence_insert", {
        "rule": rule, "run": run, "created_time": now, "until_time": now + duration_s,
        "comment": comment})[0]
    return {**row, "until": row["until_time"], "matches": matches}


def silence(state, rule: str, run: str, duration_s: float, comment: str | None = None) -> int:
    """Silence rules matching ``rule`` on runs matching ``run`` for ``duration_s``: its id."""
    return add_silence(state, rule, run, duration_s, comment)["id"]


def unsilence(state, ident: int) -> dict:
    """End silence ``ident`` now; its row. 404 if unknown, 409 if it had already ended."""
    ended = rows(state, "alerts/api_silence_end", {"id": ident, "now": time.time()})
    if ended:
        return ended[0]
    if not rows(state, "alerts/api_silence", {"id": ident}):
        raise CliffwatchError(f"no silence {ident}; `{COMMAND} alerts list` shows the "
                              "silences in force", status=404)
    raise CliffwatchError(f"silence {ident} has already ended", status=409)


# where a test message was asked for, as its text says it ("sent from the dashboard's ..."):
# the keys are what POST /api/alerts/test takes as "from"
SENT_FROM = {"dashboard": "the dashboard's Send test message button (Alerts page)",
             "cliffwatch": "`cliffwatch alerts test`",
             "python -m app": "`python -m app alerts test`",
             "api": "a POST to /api/alerts/test"}


def send_test(state, key: str | None = None, origin: str = "dashboard") -> int:
    """Queue a test message to every webhook and wake the delivery worker: its notification
    id (``test_results`` follows it). ``origin``: a key of SENT_FROM."""
    if origin not in SENT_FROM:
        raise CliffwatchError(f"a test message's \"from\" is one of {', '.join(SENT_FROM)}; "
                              f"got {origin!r}", status=400)
    delivery = getattr(state, "delivery", None)
    if delivery is None:
        raise CliffwatchError("this server does not deliver alerts yet (still starting?); "
                              "try again in a moment", status=503)
    nid = queue_test(state, [t.id for t in delivery.targets], key or f"test-{uuid.uuid4().hex}",
                     SENT_FROM[origin])
    delivery.poke()
    return nid


def queue_test(state, target_ids: list[str], key: str, sent_from: str) -> int:
    """A `test` notification and one outbox row per target, in one transaction."""
    now = time.time()
    facts = {"rule": "test", "type": "test", "severity": "info", "kind": "test", "run": None,
             "metric": None, "value": None, "typical": None, "step": None, "time": now,
             "causes": [], "evidence": [], "checkpoint": None,
             "summary": f"sent from {sent_from}; this webhook works"}
    cur = state.monitor.db.cursor()
    cur.begin()
    try:
        nid = queries.execute(cur, "alerts/api_test_notification", {
            "key": key, "created_time": now,
            "facts": orjson.dumps(facts).decode()}).fetchall()[0][0]
        for target in target_ids:
            queries.execute(cur, "alerts/api_test_outbox",
                            {"notification_id": nid, "target": target, "now": now})
        cur.commit()
    except BaseException:
        state.monitor.db.rollback(cur)
        raise
    return nid


def rows(state, name: str, params: dict) -> list[dict]:
    return cursor_rows(state.monitor.db.cursor(), name, params)
