"""`alerts check|silence|unsilence|test|list`: rules files checked here, the rest through the
running server (reach.py, as for `sql`: server.json, the token from CLIFFWATCH_TOKEN)::

    $ python -m app alerts check runs/alerts.toml
    runs/alerts.toml:7: rule 'loss-high': field 'op': must be one of >, >=, <, <=; got '=>'
    $ python -m app alerts silence stall --run 'gpt-*' --for 2h
    silence 3: rules matching 'stall' (stall) on runs 'gpt-*' until 23:40:12 UTC
      end it early with `python -m app alerts unsilence 3`
    $ python -m app alerts test
    https://hooks.slack.com/services/T…/…: sent (HTTP 200, 212 ms)
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from ..alerts.overview import overview
from ..alerts.rules import load_rules, read_rules
from ..alerts.targets import targets
from ..command import COMMAND
from ..db.database import Database
from ..reach import Server, need_server, open_target


def check(path: Path | None, logdir: Path) -> int:
    path = Path(path) if path else Path(logdir) / "alerts.toml"
    rules, problems = read_rules(path)
    for problem in problems:
        print(problem)
    if problems:
        if not path.exists() and not path.is_symlink():
            print("(with no rules file the server uses its built-in rules: stall, nonfinite, "
                  "incident)")
        return 1
    print(f"ok: {len(rules)} rule{'s' if len(rules) != 1 else ''}")
    return 0


def silence(logdir, db, settings, rule: str, run: str, duration: str,
            comment: str | None) -> int:
    server = need_server(logdir, db, settings, "a silence")
    payload = {"rule": rule, "run": run, "for": duration}
    if comment:
        payload["comment"] = comment
    made = server.call("POST", "/api/alerts/silences", json=payload)
    print(f"silence {made['id']}: rules matching {made['rule']!r} "
          f"({', '.join(made['matches'])}) on runs {made['run']!r} until {_when(made['until'])}")
    print(f"  end it early with `{COMMAND} alerts unsilence {made['id']}`")
    return 0


def unsilence(logdir, db, settings, ident: int) -> int:
    ended = need_server(logdir, db, settings, "ending a silence").call(
        "POST", f"/api/alerts/silences/{ident}/end")
    print(f"silence {ended['id']} (rules {ended['rule']!r}, runs {ended['run']!r}) ended; "
          "what is still firing notifies again")
    return 0


def send_test(logdir, db, settings) -> int:
    server = need_server(logdir, db, settings, "a test message")
    # the server waits up to its webhook timeout + 2 s for each answer
    sent = server.call("POST", "/api/alerts/test", json={"from": COMMAND}, timeout=None)
    for result in sent["results"]:
        print(f"{result['label']}: {result_text(result)}")
    return 0 if all(r["status"] == "sent" for r in sent["results"]) else 1


def result_text(result: dict) -> str:
    status, code, error = result["status"], result.get("http_status"), result.get("error")
    http = f"HTTP {code}" if code else ""
    if status == "sent":
        took = f"{result['elapsed_ms']:.0f} ms" if result.get("elapsed_ms") else ""
        detail = ", ".join(p for p in (http, took) if p)
        return f"sent ({detail})" if detail else "sent (written to the server's log)"
    if status == "pending":
        waiting = result.get("waiting_before") or 0
        why = (f"{waiting} earlier message(s) wait before it" if waiting
               else f"last attempt: {error}" if error else "not tried yet")
        return (f"not delivered yet after {result.get('attempts', 0)} attempt(s) ({why}); "
                f"it is retried: see `{COMMAND} alerts list`")
    return f"{status} ({http + ': ' if http else ''}{error})"


def list_alerts(logdir, db, settings, as_json: bool) -> int:
    target = open_target(logdir, db, settings, command="alerts")
    if isinstance(target, Server):
        data = target.call("GET", "/api/alerts")
    else:
        data = _local_overview(target, logdir, settings)
    if as_json:
        print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render(data), end="")
    return 0


def _local_overview(database: Database, logdir: Path, settings) -> dict:
    try:
        rules, source = load_rules(Path(settings.rules) if settings.rules else None, logdir)
        return overview(database.cursor(), rules, source, targets(settings))
    finally:
        database.close()


def render(data: dict) -> str:
    out = [f"rules ({data['rules_source']}):"]
    out += [f"  {r['name']:<20} {r['severity']:<8} runs {r['runs']:<10} {r['when']}"
            for r in data["rules"]]
    out.append("targets: " + ", ".join(t["label"] for t in data["targets"]))
    active = [s for s in data["states"] if s["state"] in ("pending", "firing")]
    out.append(f"pending or firing: {len(active)}")
    out += [f"  {s['state']:<8} {s['rule']} on {s['run']}"
            f"{' / ' + s['metric'] if s['metric'] else ''} since {_when(s['changed_time'])}"
            for s in active]
    out.append(f"silences in force: {len(data['silences'])}")
    out += [f"  {s['id']}: rules {s['rule']!r} runs {s['run']!r} until {_when(s['until_time'])}"
            f"{' - ' + s['comment'] if s.get('comment') else ''}" for s in data["silences"]]
    out.append(f"recent notifications: {len(data['notifications'])}")
    for note in data["notifications"]:
        sent = ", ".join(f"{o['status']}, {o['attempts']} attempt(s)" for o in note["outbox"])
        shown = "silenced" if note["silenced"] else sent or "no target"
        out.append(f"  {note['id']} {_when(note['created_time'])} {note['text']} [{shown}]")
    return "\n".join(out) + "\n"


def _when(unix: float | None) -> str:
    if unix is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))
    except (OverflowError, OSError, ValueError):
        # a silence stored before durations were bounded can end past any date
        return f"{unix:.0f} (Unix seconds, past any date)"
