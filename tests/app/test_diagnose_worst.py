"""An incident shows its worst point (issue 10, section 1): on a replica of the seed's log whose
loss already rises on the line after the checkpoint stall (4.55 at step 2027) and peaks at 13.0
two steps later, the spike starts at 2027 but quotes its peak, 13.0 at step 2029, in the
report, the --json output and the live `incidents` table the page and the alerts read."""

from __future__ import annotations

import json
import shutil

import duckdb

from app.db import queries
from app.db.database import migrate
from app.diagnose.detect import Watch
from app.diagnose.diagnosis import LiveDiagnosis
from tests.app.test_diagnose import diagnose_json
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SAMPLES, run_cli


def replica(tmp_path):
    """samples/seed-cliff with the loss already up (4.55) on the first line after the stall."""
    run = tmp_path / "logs" / "seed"
    shutil.copytree(SAMPLES / "seed-cliff", run)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        if line["step"] == 2027:
            line["loss"] = 4.55
    (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def test_spike_reports_its_peak_and_where(tmp_path):
    run = replica(tmp_path)
    found = {(i["kind"], i["step"]): i for i in diagnose_json(run)}
    spike = found[("spike", 2027)]
    assert (spike["end_step"], spike["value"], spike["worst_step"]) == (2035, 13.0, 2029)
    cliff = found[("cliff", 4231)]  # the bottom of the cliff, not its first line
    accuracy = {x["step"]: x["accuracy"] for x in map(
        json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    bottom = min(v for s, v in accuracy.items() if 4231 <= s <= cliff["end_step"])
    assert cliff["value"] == bottom and accuracy[cliff["worst_step"]] == bottom
    assert found[("stall", 2027)]["worst_step"] == 2027
    done = run_cli("diagnose", str(run))
    assert done.returncode == 0, done.stderr
    assert "SPIKE in loss at step 2027 (through 2035): peak 13 at step 2029, up from" in (
        done.stdout)


def test_live_incidents_store_the_worst_point(tmp_path):
    replica(tmp_path)
    with ingest(tmp_path / "logs") as mon:
        LiveDiagnosis(mon.db, Watch()).update()
        rows = query(mon, "SELECT step, end_step, value, worst_step FROM incidents "
                          "WHERE kind = 'spike' ORDER BY step")
        assert rows[0] == (2027, 2035, 13.0, 2029)
        named = queries.execute(mon.db.cursor(), "incidents", {"run": "seed"})
        columns = [d[0] for d in named.description]
        first = dict(zip(columns, named.fetchall()[0], strict=True))
        assert first["worst_step"] is not None


def test_incidents_stored_before_keep_their_step_as_worst(tmp_path):
    """A database from before the migration: its incidents quoted the first line's value."""
    con = duckdb.connect(str(tmp_path / "old.duckdb"))
    queries.execute(con, "db/migrations_table")
    for name, sql in queries.migrations():
        if name.startswith("0008"):
            break
        con.execute(sql)
        queries.execute(con, "db/migration_record", {"name": name})
    con.execute("INSERT INTO incidents (run, kind, metric, step, end_step, value, baseline) "
                "VALUES ('r', 'spike', 'loss', 10, 12, 4.0, 1.0)")
    assert "0008_incident_worst" in migrate(con)
    assert con.execute("SELECT step, worst_step FROM incidents").fetchall() == [(10, 10)]
    con.close()
