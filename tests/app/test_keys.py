"""The log format's key names are one definition (app/keys.py, issue 10 section 3): the validator
and ingest refuse the same `step` values, and the detector's own working columns cannot take a
user metric's name."""

from __future__ import annotations

import json

from app import keys
from app.diagnose import detect
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import diagnose
from app.ingest import columns
from app.logformat import validate_run
from tests.app.test_ingest_bad_input import ingest, query

# `step` values beside what the validator and ingest make of them: 7.0 and 2**63 each used to
# be refused by one and stored by the other.
STEPS = [(7.0, False), (True, False), ("9", False), (2**63, False), (-(2**63) - 1, False),
         (10.5, False), (3100, True), (2**63 - 1, True)]


def test_validator_and_ingest_refuse_the_same_steps(tmp_path):
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    # enough clean lines first that the fast path reads them and the careful one the rest
    lines = [{"step": s, "loss": 1.0} for s in range(1, 3001)]
    lines += [{"step": step, "loss": 2.0} for step, _ in STEPS]
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    refused_by_validator = {int(p.split(":")[1]) for p in validate_run(run)}
    with ingest(tmp_path / "logs") as mon:
        offsets = {o for (o,) in query(mon, "SELECT \"offset\" FROM ingest_errors "
                                            "WHERE severity = 'error'")}
        stored = {s for (s,) in query(mon, "SELECT step FROM metrics_all WHERE step > 3000")}
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(json.dumps(line)) + 1)
    refused_by_ingest = {starts.index(o) + 1 for o in offsets}
    expected = {3001 + i for i, (_, ok) in enumerate(STEPS) if not ok}
    assert refused_by_validator == refused_by_ingest == expected
    assert stored == {step for step, ok in STEPS if ok}


def test_one_step_rule():
    assert [keys.is_step(step) for step, _ in STEPS] == [ok for _, ok in STEPS]


def test_storage_names_follow_the_key_names():
    # ingest/columns.py types the special keys and prefixes the monitor's names; until it
    # imports them from app.keys, this keeps the two lists equal
    assert set(columns.SPECIAL) == keys.SPECIAL
    assert columns.RESERVED == keys.MONITOR_COLUMNS
    assert keys.NOT_METRICS <= detect.NOT_METRICS


def test_no_log_key_becomes_a_private_frame_column():
    for key in [detect.NONFINITE + "loss", "\x00clock", "\x00", detect.PRIVATE + "t"]:
        assert not columns.column_name(key).startswith(detect.PRIVATE)


def test_a_metric_named_t_is_diagnosed(tmp_path):
    # the detector's clock column was once called "t", which hid a user metric of that name
    run = tmp_path / "logs" / "r"
    run.mkdir(parents=True)
    values = [1.0 + 0.01 * (i % 3) for i in range(40)] + [9.0] + [1.0] * 10
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "t": v, "elapsed_s": 10.0 * s}) + "\n"
        for s, v in enumerate(values, start=1)))
    with ingest(tmp_path / "logs") as mon:
        incidents = diagnose(mon.db.cursor(), Watch(loss="t"))
    assert [(i.kind, i.metric, i.step, i.value) for i in incidents] == [("spike", "t", 41, 9.0)]
