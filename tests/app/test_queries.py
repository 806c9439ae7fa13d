"""Every .sql file in queries/ runs against a fixture database built by real ingest."""

from __future__ import annotations

import json
import shutil

import duckdb
import pytest

from app.db import queries
from app.db.readonly import run_readonly
from tests.app.test_ingest_bad_input import ingest
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory):
    logs = tmp_path_factory.mktemp("queries") / "logs"
    shutil.copytree(SAMPLES / "seed-cliff", logs / "seed-cliff")
    (logs / "restarts").mkdir()
    steps = [10, 20, 30, 20, 30, 40]
    (logs / "restarts" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "loss": 1 / s}) + "\n" for s in steps) + "not json\n")
    (logs / "restarts" / "rank0.jsonl").write_text(json.dumps(
        {"step": 10, "rank": 0, "step_time_s": 0.4, "data_wait_s": 0.1}) + "\n")
    monitor = ingest(logs)
    # ingest's own reads go through copies in scratch space, the one place DuckDB may read
    (monitor.scratch / "chunk.jsonl").write_text(json.dumps({"step": 99, "elapsed_s": 1.5})
                                                 + "\n")
    yield monitor, monitor.scratch
    monitor.close()


def example_params(cursor, query, chunks) -> dict:
    values = {}
    for name, param in query.params.items():
        if name == "path":
            values[name] = str(chunks / "chunk.jsonl")
        else:
            values[name] = cursor.execute(f"SELECT {param.example}").fetchone()[0]
    return values


def chunk_source(query) -> str | None:
    for line in query.sql.splitlines():
        if line.startswith("-- chunk:"):
            return line.split(":", 1)[1].strip()
    return None


@pytest.mark.parametrize("name", queries.all_files())
def test_query_runs(fixture_db, name):
    monitor, chunks = fixture_db
    query = queries.load(name)
    assert query.title and query.description, f"{name}.sql needs a title and description"
    if name.startswith("db/"):  # settings and bookkeeping: a scratch database
        scratch = duckdb.connect()
        scratch.execute(queries.load("db/migrations_table").text())
        if name == "db/rollback":
            scratch.begin()
        scratch.execute(query.text(), example_params(scratch, query, chunks))
        return
    cursor = monitor.db.cursor()
    params = example_params(cursor, query, chunks)
    identifiers = {k: v.example for k, v in query.identifiers.items()}
    if "/" not in name:  # user-facing: read-only, through the same helper as the API
        result = run_readonly(cursor, query.text(), params=params, max_rows=100, time_limit=30)
        assert result.columns
        return
    source = chunk_source(query)
    cursor.begin()
    try:
        if source:
            # an empty batch shaped like the table: binds and runs the statement; the ingest
            # tests cover the rows themselves
            cursor.register("chunk", cursor.sql(f"SELECT * FROM {source} LIMIT 0")
                            .to_arrow_table())
        cursor.execute(query.text(identifiers), params)
    finally:
        cursor.rollback()
        if source:
            cursor.unregister("chunk")


def named(monitor, name: str, **params) -> list[dict]:
    query = queries.load(name)
    result = run_readonly(monitor.db.cursor(), query.text(), params=query.bind(params),
                          max_rows=10_000, time_limit=30)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def test_named_queries_answer_the_seed_questions(fixture_db):
    monitor, _ = fixture_db
    gaps = [g for g in named(monitor, "time_gaps", run="seed-cliff") if g["ratio"] > 3]
    assert [(g["step"], g["steps"], round(g["gap_s"], 1), round(g["ratio"], 1)) for g in gaps] == [
        (2027, 27, 167.2, 16.7), (4019, 18, 112.0, 11.2)]
    assert [s["step"] for s in named(monitor, "stalls", run="seed-cliff")] == [2027, 4019]
    assert [s["step"] for s in named(monitor, "spikes", run="seed-cliff", metric="loss")] == [
        2029, 4021]
    assert [c["step"] for c in named(monitor, "cliffs", run="seed-cliff",
                                     metric="accuracy")] == [4231]
    epochs = named(monitor, "epoch_boundaries", run="seed-cliff")
    assert [(e["step"], e["epoch"], e["source"]) for e in epochs] == [
        (0, 0, "event"), (2114, 1, "event"), (4228, 2, "event")]
    runs = {b["step"]: b for b in named(monitor, "bucket_runs", run="seed-cliff")}
    assert runs[4231]["homogeneity"] == 1.0 and runs[4231]["last_bucket"] == 5
    assert runs[4231]["same_bucket_run"] > 3 * max(runs[s]["same_bucket_run"] for s in
                                                    range(1001, 2000, 2))


def test_attempts_summary_and_downsample(fixture_db):
    monitor, _ = fixture_db
    attempts = named(monitor, "attempts", run="restarts")
    assert [(a["attempt"], a["start_step"], a["reason"], a["lines"]) for a in attempts] == [
        (1, 10, "start", 3), (2, 20, "step_back", 3)]
    summary = named(monitor, "run_summary", run="seed-cliff")[0]
    assert (summary["lines"], summary["last_step"], summary["checkpoints"]) == (2230, 4499, 2)
    points = named(monitor, "downsample", run="seed-cliff", metric="loss", points=200)
    assert len(points) < 400 and (2029, 13.0) in {(p["step"], p["value"]) for p in points}


def test_a_header_entry_over_several_lines_is_read_whole():
    """The SQL page shows a query's description as help: it used to stop at the first line."""
    query = queries.parse("q", "-- title: T\n-- description: Seconds between lines and\n"
                               "--   the ratio to the median.\n"
                               "-- param run: run id (example: 'demo')\nSELECT 1\n-- not header")
    assert query.description == "Seconds between lines and the ratio to the median."
    assert query.params["run"].example == "'demo'"
    assert queries.load("time_gaps").description.endswith("ratio 16.7.")
