"""Alert rules files: every kind of mistake is named with its line and key, good files load,
every type round-trips, and durations read the way docs/alerts.md says."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from app.alerts.duration import DurationTooLong, format_duration, parse_duration
from app.alerts.positions import positions
from app.alerts.rule_types import ALL_KEYS
from app.alerts.rules import (
    Rule,
    RuleProblem,
    check_file,
    default_rules,
    describe,
    load_rules,
    parse_rules,
    rules_path,
    to_toml,
)
from app.errors import CliffwatchError

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "alerts.toml"

# A good rule of each type; cases below break one key of one of them.
THRESHOLD = """\
[[rule]]
name = "loss-high"
type = "threshold"
metric = "loss"
op = ">"
value = 5
"""
CHANGE = """\
[[rule]]
name = "acc-cliff"
type = "change"
metric = "accuracy"
direction = "fall"
fraction = 0.4
"""
STALL = """\
[[rule]]
name = "stall"
type = "stall"
min = "60s"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "alerts.toml"
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, text: str) -> list[RuleProblem]:
    return check_file(write(tmp_path, text))


def edit(base: str, key: str, line: str | None) -> str:
    """``base`` with the line of ``key`` replaced by ``line`` (removed when None)."""
    out = []
    for raw in base.splitlines():
        if raw.split("=")[0].strip() == key:
            if line is not None:
                out.append(line)
        else:
            out.append(raw)
    return "\n".join(out) + "\n"


# (text, line, field, part of the message)
MISTAKES = [
    pytest.param('[[rule]]\nname = "a\ntype = "stall"\n', 2, None, "TOML syntax error",
                 id="toml-syntax"),
    pytest.param(THRESHOLD + "op = \"<\"\n", 7, None, "TOML syntax error", id="toml-duplicate-key"),
    pytest.param(edit(STALL, "min", "min = 60 s"), 4, None, "TOML syntax error",
                 id="toml-invalid-value"),
    pytest.param(edit(THRESHOLD, "type", 'type = "treshold"'), 3, "type",
                 "did you mean 'threshold'?", id="unknown-type"),
    pytest.param(edit(THRESHOLD, "type", None), 1, "type", "is missing", id="missing-type"),
    pytest.param(edit(THRESHOLD, "name", None), 1, "name", "is missing", id="missing-name"),
    pytest.param(edit(THRESHOLD, "metric", None), 1, "metric", "is missing",
                 id="missing-metric-threshold"),
    pytest.param(edit(CHANGE, "metric", None), 1, "metric", "is missing",
                 id="missing-metric-change"),
    pytest.param(edit(THRESHOLD, "op", None), 1, "op", "is missing", id="missing-op"),
    pytest.param(edit(THRESHOLD, "value", None), 1, "value", "is missing", id="missing-value"),
    pytest.param(edit(CHANGE, "direction", None), 1, "direction", "is missing",
                 id="missing-direction"),
    pytest.param(THRESHOLD + 'for = "5x"\n', 7, "for", "neither a duration nor a number of lines",
                 id="bad-for"),
    pytest.param(THRESHOLD + "for = 20\n", 7, "for", 'for = "20 lines"', id="for-bare-number"),
    pytest.param(THRESHOLD + 'for = "0 lines"\n', 7, "for", "at least 1 line", id="for-0-lines"),
    pytest.param(THRESHOLD + 'repeat = "-1h"\n', 7, "repeat", "negative", id="repeat-negative"),
    pytest.param(THRESHOLD + 'repeat = ""\n', 7, "repeat", "empty", id="repeat-empty"),
    pytest.param(THRESHOLD + 'repeat = "10M"\n', 7, "repeat", "unit s, m, h or d",
                 id="repeat-unit"),
    pytest.param(THRESHOLD + 'repeat = "0s"\n', 7, "repeat", "longer than 0", id="repeat-zero"),
    # issue 18, finding 11: past a year, a date cannot show when it ends
    pytest.param(THRESHOLD + 'repeat = "999999999999d"\n', 7, "repeat", "longer than a year",
                 id="repeat-past-a-year"),
    pytest.param(THRESHOLD + "repeat = 99999999999999999999999\n", 7, "repeat",
                 "longer than a year", id="repeat-huge-number"),
    pytest.param(THRESHOLD + 'for = "366d"\n', 7, "for", "accepted; give 365d or less",
                 id="for-past-a-year"),
    pytest.param(edit(STALL, "min", 'min = "999999999999d"'), 4, "min", "longer than a year",
                 id="min-past-a-year"),
    pytest.param(STALL + 'checkpoint_budget = "8761h"\n', 5, "checkpoint_budget",
                 "longer than a year", id="checkpoint-budget-past-a-year"),
    pytest.param(edit(STALL, "min", 'min = "ten"'), 4, "min", "not a duration", id="min-text"),
    pytest.param(STALL + 'checkpoint_budget = "30m10h"\n', 5, "checkpoint_budget",
                 "largest first", id="checkpoint-budget-order"),
    pytest.param(THRESHOLD + "vlaue = 5\n", 7, "vlaue", "did you mean 'value'?",
                 id="unknown-key-near"),
    pytest.param(THRESHOLD + "repeat_s = 60\n", 7, "repeat_s", "write 'repeat' instead",
                 id="unknown-key-attribute"),
    pytest.param(THRESHOLD + "for_lines = 20\n", 7, "for_lines", "write 'for' instead",
                 id="unknown-key-for-lines"),
    pytest.param(THRESHOLD + "direction = \"rise\"\n", 7, "direction",
                 "is a key of type change, not of type 'threshold'",
                 id="key-of-other-type"),
    pytest.param('[[rule]]\nname = "n"\ntype = "nonfinite"\nmetric = "loss"\n', 4, "metric",
                 "did you mean 'metrics'?", id="key-of-other-type-near"),
    pytest.param(THRESHOLD + 'colour = "red"\n', 7, "colour", "the keys here are",
                 id="unknown-key-far"),
    pytest.param(THRESHOLD + 'runs = "gpt-[ab"\n', 7, "runs", "no closing ']'",
                 id="bad-glob-runs"),
    pytest.param(THRESHOLD + 'runs = "{a,b}-*"\n', 7, "runs", "not glob syntax",
                 id="brace-glob-runs"),
    pytest.param('[[rule]]\nname = "n"\ntype = "nonfinite"\nmetrics = ["loss", "grad_[x"]\n',
                 4, "metrics", "item 2: 'grad_[x' is not a valid glob", id="bad-glob-metrics"),
    pytest.param(edit(THRESHOLD, "op", 'op = "=>"'), 5, "op", "did you mean '>='?", id="bad-op"),
    pytest.param(edit(THRESHOLD, "op", 'op = "=="'), 5, "op", "must be one of >, >=, <, <=",
                 id="bad-op-eq"),
    pytest.param(edit(THRESHOLD, "type", 'type = "Threshold"'), 3, "type",
                 "did you mean 'threshold'?", id="type-capitalised"),
    pytest.param(THRESHOLD + 'severity = "critcal"\n', 7, "severity",
                 "did you mean 'critical'?", id="bad-severity"),
    pytest.param(edit(CHANGE, "direction", 'direction = "down"'), 5, "direction",
                 "must be one of rise, fall", id="bad-direction"),
    pytest.param(edit(CHANGE, "fraction", None), 1, "factor", "exactly one of factor",
                 id="change-neither"),
    pytest.param(CHANGE + "factor = 2\n", 7, "factor", "exactly one of factor",
                 id="change-both"),
    pytest.param(edit(CHANGE, "fraction", "fraction = 1.5"), 6, "fraction", "must be below 1",
                 id="fall-fraction-1"),
    pytest.param(edit(CHANGE, "fraction", "factor = 1"), 6, "factor", "more than 1",
                 id="change-factor-1"),
    pytest.param(THRESHOLD + "\n" + THRESHOLD, 9, "name", "already the name of the rule at line 1",
                 id="duplicate-name"),
    pytest.param(edit(THRESHOLD, "name", 'name = "loss high"'), 2, "name", "only letters",
                 id="bad-name"),
    pytest.param(edit(THRESHOLD, "value", 'value = "5"'), 6, "value", "not the text '5'",
                 id="number-as-text"),
    pytest.param(edit(THRESHOLD, "value", "value = nan"), 6, "value", "finite",
                 id="value-nan"),
    pytest.param(edit(THRESHOLD, "value", "value = true"), 6, "value", "not true/false",
                 id="value-bool"),
    pytest.param(CHANGE + 'window = "20"\n', 7, "window", "without quotes", id="window-as-text"),
    pytest.param(CHANGE + "window = 2.5\n", 7, "window", "whole number", id="window-float"),
    pytest.param(THRESHOLD + 'notify_resolved = "false"\n', 7, "notify_resolved",
                 "without quotes", id="bool-as-text"),
    pytest.param(THRESHOLD + "runs = 5\n", 7, "runs", "must be text", id="glob-as-number"),
    pytest.param('[[rule]]\nname = "n"\ntype = "nonfinite"\nmetrics = "loss"\n', 4, "metrics",
                 "must be a list", id="metrics-not-list"),
    pytest.param(STALL + 'factor = "10"\n', 5, "factor", "not the text", id="stall-factor-text"),
    pytest.param(STALL + "factor = 0.5\n", 5, "factor", "at least 1", id="stall-factor-small"),
    pytest.param('[[rule]]\nname = "i"\ntype = "incident"\nkinds = ["spike", "boom"]\n', 4,
                 "kinds", "must be one of spike, cliff, stall, nonfinite", id="bad-kind"),
    pytest.param('[[rule]]\nname = "i"\ntype = "incident"\nkinds = []\n', 4, "kinds",
                 "is empty", id="no-kinds"),
    pytest.param('severity = "info"\n\n' + THRESHOLD, 1, None, "outside any [[rule]] table",
                 id="key-outside-rule"),
    pytest.param('[[rules]]\nname = "x"\n', 1, None, "did you mean [[rule]]?",
                 id="rules-plural"),
    pytest.param('[rule]\nname = "x"\n', 1, None, "two brackets", id="rule-one-bracket"),
    pytest.param('rule = [{name = "x", type = "stall"}]\n', 1, None, "as a [[rule]] table",
                 id="rule-inline"),
    pytest.param(THRESHOLD + "[options]\nquiet = true\n", 7, None, "unknown table [options]",
                 id="other-table"),
]


@pytest.mark.parametrize(("text", "line", "field", "message"), MISTAKES)
def test_each_mistake_is_named_with_its_line_and_field(tmp_path, text, line, field, message):
    problems = problems_of(tmp_path, text)
    assert any(p.line == line and p.field == field and message in p.message
               for p in problems), "\n".join(map(str, problems))


def test_a_problem_reads_file_line_rule_and_field(tmp_path):
    path = write(tmp_path, edit(THRESHOLD, "op", 'op = "=="'))
    (problem,) = check_file(path)
    assert str(problem) == (f"{path}:5: rule 'loss-high': field 'op': must be one of >, >=, <, "
                            "<=; got '=='")


def test_every_mistake_in_the_file_is_named_in_one_pass(tmp_path):
    text = (edit(THRESHOLD, "op", 'op = "=>"') + 'for = "5x"\n\n'  # lines 5 and 7
            + edit(CHANGE, "metric", None)  # rule at line 9
            + "\n" + THRESHOLD.replace("loss-high", "acc-cliff")  # line 16: duplicate name
            + 'runs = "gpt-[ab"\n')  # line 21
    found = [(p.line, p.field) for p in problems_of(tmp_path, text)]
    assert found == [(5, "op"), (7, "for"), (9, "metric"), (16, "name"), (21, "runs")]


def test_a_file_that_is_not_there_or_not_utf8_is_named(tmp_path):
    (missing,) = check_file(tmp_path / "nope.toml")
    assert missing.line == 0 and "no such file" in str(missing)
    path = tmp_path / "alerts.toml"
    path.write_bytes(THRESHOLD.encode() + b'# caf\xe9\n')
    (latin1,) = check_file(path)
    assert latin1.line == 7 and "UTF-8" in latin1.message


def test_a_bom_is_read_and_an_unfinished_file_names_its_last_line(tmp_path):
    path = tmp_path / "alerts.toml"
    path.write_bytes(b"\xef\xbb\xbf" + THRESHOLD.encode())
    assert check_file(path) == []
    (problem,) = problems_of(tmp_path, THRESHOLD + "\nrepeat = [\n")
    assert (problem.line, problem.field) == (8, None) and "at the end of the file" in str(problem)


def test_the_sample_file_checks_and_has_every_type():
    assert check_file(SAMPLE) == []
    rules, source = load_rules(SAMPLE, ROOT)
    assert source == f"{SAMPLE} (6 rules)"
    assert {r.type for r in rules} == {"threshold", "change", "nonfinite", "stall", "incident"}
    loss = rules[0]
    assert (loss.name, loss.metric, loss.op, loss.value, loss.for_lines, loss.line) == (
        "loss-high", "loss", ">", 5.0, 20, 21)


def test_defaults_apply_when_there_is_no_file(tmp_path):
    rules, source = load_rules(None, tmp_path)
    assert (rules, source) == (default_rules(), "built-in rules")
    stall, nonfinite, incident = rules
    assert (stall.type, stall.stall_factor, stall.min_s) == ("stall", 10.0, 60.0)
    assert (nonfinite.type, nonfinite.metrics) == ("nonfinite", ())
    assert (incident.type, incident.kinds) == ("incident", ("spike", "cliff", "stall",
                                                            "divergence", "frozen", "crash"))
    back, problems = parse_rules(to_toml(rules))
    assert problems == [] and [dataclasses.replace(r, line=0) for r in back] == rules


def test_logdir_alerts_toml_is_used_and_a_given_path_wins(tmp_path):
    assert rules_path(None, tmp_path) is None and rules_path("", tmp_path) is None
    write(tmp_path, STALL)
    assert rules_path(None, tmp_path) == tmp_path / "alerts.toml"
    rules, source = load_rules(None, tmp_path)
    assert [r.name for r in rules] == ["stall"] and source.endswith("alerts.toml (1 rule)")
    other = tmp_path / "other.toml"
    other.write_text(THRESHOLD)
    assert [r.name for r in load_rules(other, tmp_path)[0]] == ["loss-high"]
    write(tmp_path, "")  # an empty file is no rules at all: how to turn alerts off
    assert load_rules(None, tmp_path) == ([], f"{tmp_path / 'alerts.toml'} (0 rules)")


def test_a_bad_file_stops_loading_with_every_problem(tmp_path):
    path = write(tmp_path, edit(THRESHOLD, "op", 'op = "=="') + 'for = "5x"\n')
    with pytest.raises(CliffwatchError) as err:
        load_rules(path, tmp_path)
    text = str(err.value)
    assert f"{path}:5:" in text and f"{path}:7:" in text and "2 problems" in text
    assert "alerts check" in text and "--rules" in text
    with pytest.raises(CliffwatchError, match="no such file"):
        load_rules(tmp_path / "missing.toml", tmp_path)


EVERY_TYPE = [
    Rule(name="t", type="threshold", runs="gpt-*", severity="critical", for_lines=20,
         repeat_s=90.0, notify_resolved=False, metric="loss", op="<=", value=-0.5),
    Rule(name="c1", type="change", for_s=150.0, metric="acc", direction="fall", fraction=0.4,
         window=7),
    Rule(name="c2", type="change", metric="grad norm \"x\"", direction="rise", factor=2.5),
    Rule(name="n", type="nonfinite", severity="info", metrics=("loss", "grad_[ab]*")),
    Rule(name="s", type="stall", stall_factor=3.0, min_s=5.0, checkpoint_budget_s=0.5),
    Rule(name="i", type="incident", kinds=("nonfinite", "cliff"), repeat_s=86400.0 + 60),
]


@pytest.mark.parametrize("rule", EVERY_TYPE, ids=lambda r: r.name)
def test_every_type_round_trips_through_a_file(tmp_path, rule):
    path = write(tmp_path, to_toml([rule]))
    assert check_file(path) == []
    (back,), _ = load_rules(path, tmp_path)
    assert back == dataclasses.replace(rule, line=1)
    assert describe(back)


DESCRIBED = [
    (EVERY_TYPE[0], "loss <= -0.5 for 20 lines"),
    (EVERY_TYPE[1], "acc falls 40% below its median of the last 7 lines for 2m30s"),
    (EVERY_TYPE[2], 'grad norm "x" rises to 2.5× its median of the last 20 lines'),
    (EVERY_TYPE[3], "NaN or ±inf in loss, grad_[ab]*"),
    (EVERY_TYPE[5], "an incident of kind nonfinite, cliff"),
]


@pytest.mark.parametrize(("rule", "text"), DESCRIBED, ids=lambda x: getattr(x, "name", ""))
def test_describe_says_when_a_rule_fires(rule, text):
    assert describe(rule) == text


def test_line_numbers_survive_comments_headers_and_multiline_values():
    text = (
        '# a comment with name = "x" in it\n'       # 1
        "\n"                                         # 2
        "  [[ rule ]]   # spaced header\n"           # 3
        'name = "a"  # = comment; \u2028 is no line break\n'  # 4
        "metrics = [\n"                              # 5
        '  "loss",   # op = ">"\n'                   # 6
        '  "grad_*", "]",\n'                         # 7
        "]\n"                                        # 8
        'note = """\n'                               # 9
        'type = "not a key"\n'                       # 10
        '"""\n'                                      # 11
        "\"type\" = 'nonfinite'\r\n"                 # 12
        "[[rule]]\n"                                 # 13
        "name = 'b'\n"                               # 14
    )
    layout = positions(text)
    assert [b.line for b in layout.rules] == [3, 13]
    assert layout.rules[0].keys == {"name": 4, "metrics": 5, "note": 9, "type": 12}
    assert layout.rules[1].keys == {"name": 14}
    problems = parse_rules(text)[1]
    assert [(p.line, p.field) for p in problems] == [(9, "note"), (13, "type")]


DURATIONS = [
    ("90s", 90.0), ("10m", 600.0), ("4h", 14400.0), ("2h30m", 9000.0), ("1d", 86400.0),
    ("1d2h3m4s", 93784.0), ("1.5s", 1.5), ("2h 30m", 9000.0), ("0s", 0.0), ("45", 45.0),
    (" 7 ", 7.0), (30, 30.0), (0.25, 0.25), ("365d", 31_536_000.0), (31_536_000, 31_536_000.0),
]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS)
def test_durations_read_as_documented(text, seconds):
    assert parse_duration(text) == seconds


BAD_DURATIONS = [
    ("", "empty"), ("  ", "empty"), ("-5s", "negative"), (-5, "negative"),
    ("5x", "unknown unit 'x'"), ("10ms", "unknown unit 'ms'"), ("10M", "unknown unit 'M'"),
    ("30m2h", "largest first"), ("1h1h", "largest first"), ("h", "not a duration"),
    ("1e3", "unknown unit 'e'"), (float("inf"), "finite"), (True, "not a duration"),
    ([1], "not a duration"),
]


@pytest.mark.parametrize(("text", "message"), BAD_DURATIONS)
def test_bad_durations_say_what_is_accepted(text, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        parse_duration(text)
    assert "s, m, h or d" in str(err.value) or "negative" in str(err.value)


@pytest.mark.parametrize("text", [99999999999999999999999, "999999999999d", "366d", "8760h1s",
                                  31_536_000.5, 10**400, "9" * 400, "9" * 400 + "d"],
                         ids=lambda text: repr(text)[:24])
def test_durations_past_a_year_are_refused_saying_the_limit(text):
    """Issue 18, finding 11: a silence of 99999999999999999999999 s was accepted, and every
    page and command that showed its end then failed."""
    with pytest.raises(DurationTooLong, match="longer than a year") as err:
        parse_duration(text)
    assert "give 365d or less" in str(err.value) and len(str(err.value)) < 120


@pytest.mark.parametrize("seconds", [0.5, 1, 59, 60, 61, 3600, 9000, 86400, 93784, 90061.5])
def test_formatted_durations_read_back(seconds):
    assert parse_duration(format_duration(seconds)) == seconds


def test_the_docs_name_every_key():
    docs = (ROOT / "docs" / "alerts.md").read_text()
    rules_section = docs.split("## Rules", 1)[1].split("\n## ", 1)[0]
    missing = [k for k in sorted(ALL_KEYS) if f"`{k}`" not in rules_section]
    assert missing == []
    assert "python -m app alerts check" in rules_section


def test_a_fifo_or_device_named_as_the_rules_file_is_refused_not_read(tmp_path):
    """A FIFO named alerts.toml hung the server's start; a link to /dev/zero would be read
    without end."""
    fifo = tmp_path / "alerts.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        problems = check_file(path)
        assert [p.line for p in problems] == [0]
        assert "not a regular file" in str(problems[0])
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    assert "is over" in str(check_file(big)[0])
