"""Alert rules, their lifecycle and webhook delivery (docs/alerts.md). Three groups, data moving
down once: the rules file is read into Rules; each pass judges them and writes states,
notifications and outbox rows in one transaction; the delivery worker sends the outbox.

The rules-file language (what a rules file may say)
    rules.py         Which rules are in force, and what is wrong with a rules file? (Rule, load)
    rule_types.py    Which rule types are there? (the table; each type lives where it is judged)
    fields.py        Is this key's value right, and what to write instead? (Field, RuleType)
    positions.py     On which line of the file is each [[rule]] and each key?
    duration.py      What is "2h30m" in seconds, and back?

Judging (when a rule holds, and what changes then)
    judge_worker.py  When does a pass run? (poked by ingest and diagnosis, at least every 1 s)
    engine.py        What does one pass judge, and how is it written? (one transaction)
    changes.py       Which runs has ingest stored something for since the last pass?
    new_lines.py     Which of their lines does a pass read, and which runs met are history?
    line_judge.py    Which rule watches which run and column? (LineJudge: the change windows)
    lines.py         Threshold, change and nonfinite: does each new line hold the condition?
    stall.py         Stall: has a live run been silent past its budget?
    incident_rule.py Incident: which stored incidents fire, and when is one over?
    timers.py        What moves on with time alone? (for durations, repeats, incidents settled)
    lifecycle.py     inactive -> pending -> firing -> resolved, silences and repeats
    state.py         What is each (rule, run, metric) state, and what does a pass write?
    actions.py       A silence added or ended, a test message queued (page, API, CLI)
    overview.py      Everything about alerts as one JSON dict (GET /api/alerts, alerts list)

Sending (getting a notification to its webhook)
    delivery.py      When is each outbox row sent, retried or given up? (one lane per webhook)
    targets.py       Where do notifications go, by an id that is not the URL?
    answer.py        What came of one request, told without the URL?
    webhook.py       What does a notification say? (Slack, generic JSON, the log line)
    alertmanager.py  What does Alertmanager get, and what is re-sent while alerts fire?

To add a rule type judged line by line: one more RuleType in lines.py's RULE_TYPES (its keys,
description, watched columns, series and summary); rules, engine and Rule take it from there.
"""
