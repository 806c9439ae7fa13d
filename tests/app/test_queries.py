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
    (logs / "chunk.jsonl").write_text(json.dumps({"step": 99, "elapsed_s": 1.5}) + "\n")
    monitor = ingest(logs)
    yield monitor, logs
    monitor.close()


def example_params(cursor, query, logs) -> dict:
    values = {}
    for name, param in query.params.items():
        if name == "path":
            values[name] = str(logs / "chunk.jsonl")
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
    monitor, logs = fixture_db
    query = queries.load(name)
    assert query.title and query.description, f"{name}.sql needs a title and description"
    if name.startswith("db/"):  # settings and bookkeeping: a scratch database
        scratch = duckdb.connect()
        scratch.execute(queries.load("db/migrations_table").text())
        if name == "db/rollback":
            scratch.begin()
        scratch.execute(query.text(), example_params(scratch, query, logs))
        return
    cursor = monitor.db.cursor()
    params = example_params(cursor, query, logs)
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
