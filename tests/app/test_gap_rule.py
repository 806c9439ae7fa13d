"""The gap rule (seconds and steps between a line and the one logged before it, in the same
attempt) is written once, as the macros of migration 0028 (issue 22), and every query that
used to restate it answers exactly as before: on a database built by real ingest from logs
with restarts, clock-backs, lines timed by elapsed_s, by time or not at all, each changed
query is run beside its text from before the change (the old fragments below)."""

from __future__ import annotations

import json
import math
import re

import duckdb
import pytest

from app.db import queries
from app.monitor import default_db
from tests.app.test_ingest_bad_input import ingest

# The gap rule as each query wrote it before migration 0028, the reference the new text is
# compared with. line_gaps as migration 0003 defined it:
OLD_LINE_GAPS = """(SELECT run, attempt, line_id, step, lag(step) OVER w AS prev_step,
    coalesce(elapsed_s, "time") AS t,
    coalesce(elapsed_s, "time") - lag(coalesce(elapsed_s, "time")) OVER w AS gap_s,
    step - lag(step) OVER w AS steps
FROM metrics_all WINDOW w AS (PARTITION BY run, attempt ORDER BY line_id))"""

# series_raw's pairing of each line with the one before (the chunk's first: the one at `after`)
OLD_SERIES_PAIRED = """), paired AS (
    SELECT *, coalesce(elapsed_s, "time") AS "~t",
        CASE WHEN lag("~line") OVER w IS NOT NULL THEN lag(step) OVER w
             WHEN attempt = $prev_attempt THEN $prev_step END AS "~prev_step",
        CASE WHEN lag("~line") OVER w IS NOT NULL THEN lag(coalesce(elapsed_s, "time")) OVER w
             WHEN attempt = $prev_attempt THEN $prev_t END AS "~prev_t"
    FROM src
    WINDOW w AS (PARTITION BY attempt ORDER BY "~line")
), lines AS ("""

# the three tile queries' pairing: the attempt's first line by row_number, then lag
OLD_TILES_PAIRED = """), ordered AS (
    SELECT *, coalesce(elapsed_s, "time") AS "~t", row_number() OVER w = 1 AS "~first"
    FROM src
    WINDOW w AS (PARTITION BY attempt ORDER BY "~line")
), paired AS (
    SELECT *,
        CASE WHEN NOT "~first" THEN lag(step) OVER w
             WHEN attempt = $prev_attempt THEN $prev_step END AS "~prev_step",
        CASE WHEN NOT "~first" THEN lag("~t") OVER w
             WHEN attempt = $prev_attempt THEN $prev_t END AS "~prev_t"
    FROM ordered
    WINDOW w AS (PARTITION BY attempt ORDER BY "~line")
), lines AS ("""

OLD_ENGINE_GAPS = """SELECT run,
    t - lag(t) OVER (PARTITION BY run, attempt ORDER BY line_id) AS gap_s
    FROM recent"""

OLD_RANK_LINES = """SELECT rank, attempt, step,
           coalesce(elapsed_s, "time") - lag(coalesce(elapsed_s, "time")) OVER w AS seconds,
           step - lag(step) OVER w AS steps
    FROM ranks_all
    WHERE run = $run
    WINDOW w AS (PARTITION BY rank, attempt ORDER BY rowid)
), timed AS ("""

PAIRED = re.compile(r"\), paired AS \(.*?\), lines AS \(", re.S)
CLOCK = 'line_clock(elapsed_s, "time")'

# one stretch each: a clock that stops (no time field), a line timed by its Unix time, one
# by both (elapsed_s wins), a clock that runs back, restarts (the steps back); "other" logs
# the same lines rotated, so a restart falls where the clock runs back
LINES = [{"step": 1, "elapsed_s": 0.0, "loss": 1.0}, {"step": 2, "elapsed_s": 1.5, "loss": 0.9},
         {"step": 3, "time": 1000.0, "loss": 0.8}, {"step": 4, "loss": 0.7},
         {"step": 5, "elapsed_s": 5.0, "loss": 0.6}, {"step": 6, "elapsed_s": 3.0},
         {"step": 8, "elapsed_s": 9.0, "loss": float("nan")},
         {"step": 9, "elapsed_s": 10.0, "time": 5000.0, "loss": 0.5},
         {"step": 3, "elapsed_s": 20.0, "loss": 0.8}, {"step": 4, "time": 21.0, "loss": 0.7},
         {"step": 6, "elapsed_s": 23.0, "loss": 0.5}, {"step": 7, "loss": 0.4},
         {"step": 2, "time": 40.0, "loss": 0.9}, {"step": 5, "time": 43.0, "loss": 0.6}]
RANKS = {0: [(10, 1.0), (20, 2.0), (30, None), (40, 5.0), (20, 9.0), (30, 10.5)],
         1: [(10, 1.2), (20, 2.9), (30, 3.1), (40, 2.0), (50, 6.0)]}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    logs = tmp_path_factory.mktemp("gaprule") / "logs"
    for run in ("gappy", "other"):
        (logs / run).mkdir(parents=True)
        lines = LINES if run == "gappy" else LINES[3:] + LINES[:3]
        (logs / run / "metrics.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines))
    for rank, rows in RANKS.items():
        (logs / "gappy" / f"rank{rank}.jsonl").write_text("".join(
            json.dumps({"step": s, "rank": rank, "step_time_s": 0.1,
                        **({} if t is None else {"elapsed_s": t})}) + "\n" for s, t in rows))
    with ingest(logs):
        pass
    con = duckdb.connect(str(default_db(logs)))
    con.execute("SET threads = 1")  # any_value and sums in one order: old and new alike
    yield con
    con.close()


def rows(con, sql: str, params: dict | None = None) -> list[str]:
    """Rows in a comparable order, NaN equal to NaN."""
    found = con.execute(sql, params or {}).fetchall()
    return sorted(repr(tuple("nan" if isinstance(v, float) and math.isnan(v) else v
                             for v in row)) for row in found)


def bind(query, values: dict) -> dict:
    """The values of the parameters ``query`` takes, of a set shared by several queries."""
    return query.bind({k: v for k, v in values.items() if k in query.params})


def select_of(sql: str) -> str:
    """A tile query's SELECT without its INSERT INTO, to compare what it would store."""
    return re.sub(r"^INSERT (OR REPLACE )?INTO \w+\n", "", sql, flags=re.M)


def test_the_rule_is_stored_once_and_no_query_restates_it():
    """No query but migration 0028 writes the clock or pairs a line with the one before (0003
    wrote line_gaps first: a database made before 0028 ran it, and 0028 replaces the view)."""
    restated = [name for name in queries.all_files() if not name.startswith("migrations/")
                and re.search(r'coalesce\("?~?elapsed|lag\(coalesce|lag\("~t"\)',
                              queries.load(name).sql)]
    assert restated == []
    for name, sql in queries.migrations():
        if name[:4] not in ("0003", "0028"):
            assert "lag(" not in sql, name


def test_line_gaps_by_hand(db):
    """The view's gaps, computed here line by line from what ingest stored."""
    stored = db.execute('SELECT run, attempt, line_id, step, elapsed_s, "time" FROM metrics_all '
                        "ORDER BY line_id").fetchall()
    assert len({(r[0], r[1]) for r in stored}) > 2  # the step backs started attempts
    before: dict = {}
    expected = []
    for run, attempt, line_id, step, elapsed, unix in stored:
        clock = elapsed if elapsed is not None else unix
        prev = before.get((run, attempt))
        gap = None if prev is None or prev[1] is None or clock is None else clock - prev[1]
        expected.append((run, attempt, line_id, step, prev and prev[0], clock, gap,
                         None if prev is None else step - prev[0]))
        before[(run, attempt)] = (step, clock)
    got = db.execute("SELECT * FROM line_gaps ORDER BY line_id").fetchall()
    assert got == expected
    assert any(g is not None and g < 0 for *_, g, _ in got)  # the clock-back is kept
    assert any(g is None and p is not None for *_, p, _, g, _ in got)  # a line with no clock


@pytest.mark.parametrize("name", ["time_gaps", "stalls", "checkpoints", "read/series_gap_median"])
def test_line_gaps_readers_answer_as_before(db, name):
    query = queries.load(name)
    params = bind(query, {"run": "gappy", "min_ratio": 1.0, "min_excess_s": 0.0, "min_lines": 1,
                         "window": 3})
    assert "line_gaps" in query.sql
    old = re.sub(r"\bline_gaps\b", OLD_LINE_GAPS, query.sql)
    assert rows(db, query.sql, params) == rows(db, old, params)


def chunks(db, run: str):
    """Each way a file can be read in two pieces: after every line, up to every later one."""
    file_id = db.execute("SELECT file_id FROM line_files WHERE run = ?", [run]).fetchone()[0]
    lines = db.execute('SELECT rowid, attempt, step, coalesce(elapsed_s, "time") '
                       "FROM metric_rows WHERE file_id = ? ORDER BY rowid", [file_id]).fetchall()
    yield {"file": file_id, "after": -1, "upto": None, "prev_attempt": None, "prev_step": None,
           "prev_t": None}
    for i, (rowid, attempt, step, clock) in enumerate(lines[:-1]):
        for upto in (None, lines[min(i + 3, len(lines) - 1)][0]):
            yield {"file": file_id, "after": rowid, "upto": upto, "prev_attempt": attempt,
                   "prev_step": step, "prev_t": clock}


TILE_PARAMS = {"metrics": ["loss", "~gap_s", "~gap_steps"], "base": 0, "tile": 3, "lines": 5,
               "attempt": None, "lo": None, "hi": None, "x": "step", "attempts": [1, 3],
               "x0s": [0.0, 2.0], "widths": [2.0, 2.0], "buckets": [4, 4]}


@pytest.mark.parametrize(("name", "old_paired"), [
    ("read/series_raw", OLD_SERIES_PAIRED), ("read/tiles_roll_values", OLD_TILES_PAIRED),
    ("read/tiles_roll_lines", OLD_TILES_PAIRED), ("read/tiles_mark", OLD_TILES_PAIRED)])
def test_chunk_queries_answer_as_before(db, name, old_paired):
    query = queries.load(name)
    new = select_of(query.sql)
    old = PAIRED.sub(lambda _: old_paired, new, count=1)
    assert old != new
    compared = 0
    for run in ("gappy", "other"):
        for chunk in chunks(db, run):
            params = bind(query, {**TILE_PARAMS, **chunk})
            assert rows(db, new, params) == rows(db, old, params), chunk
            compared += 1
    assert compared > 20


def test_stall_rule_typical_interval_as_before(db):
    query = queries.load("alerts/engine_typical_intervals")
    old = query.sql.replace(CLOCK, 'coalesce(elapsed_s, "time")')
    old = re.sub(r"SELECT run, line_gap\(.*?\n    FROM recent", lambda _: OLD_ENGINE_GAPS, old,
                 flags=re.S)
    assert "line_gap" not in old
    params = query.bind({"runs": ["gappy", "other"]})
    assert rows(db, query.sql, params) == rows(db, old, params)


def test_rank_step_times_as_before(db):
    query = queries.load("rank_step_times")
    old = re.sub(r"SELECT rank, attempt, step,.*?\), timed AS \(", lambda _: OLD_RANK_LINES,
                 query.sql, flags=re.S)
    assert "line_gap" not in old
    params = query.bind({"run": "gappy", "points": 3})
    assert rows(db, query.sql, params) == rows(db, old, params)
    assert rows(db, query.sql, params)


@pytest.mark.parametrize(("name", "params"), [
    ("read/runs_tail", {"file": None, "lo": 0, "hi": 100, "window_s": 5.0}),
    ("run_summary", {"run": None}), ("diagnose/rank_lines", {"run": None, "after": -1})])
def test_clock_readers_as_before(db, name, params):
    query = queries.load(name)
    if "file" in params:
        params["file"] = db.execute("SELECT min(file_id) FROM line_files").fetchone()[0]
    bound = query.bind(params)
    old = query.sql.replace(CLOCK, 'coalesce(elapsed_s, "time")')
    assert old != query.sql
    assert rows(db, query.sql, bound) == rows(db, old, bound)
