-- title: Initial schema
-- description: Runs, tracked files with their offsets, wide metrics, attempts, events, ingest errors.

CREATE TABLE runs (
    run VARCHAR PRIMARY KEY,          -- folder path relative to the log directory
    first_seen TIMESTAMP,
    last_seen TIMESTAMP,              -- last time a line of this run was ingested
    status VARCHAR,                   -- running | completed | failed | interrupted
    meta JSON,                        -- run.json as written
    steps_per_epoch BIGINT,
    world_size BIGINT
);

CREATE SEQUENCE file_ids START 1;

-- One row per tracked file. "offset" is committed in the same transaction as the rows read
-- below it, which is what makes ingest exactly-once across crashes.
CREATE TABLE files (
    file_id INTEGER PRIMARY KEY,
    run VARCHAR NOT NULL,
    path VARCHAR NOT NULL UNIQUE,     -- relative to the log directory
    kind VARCHAR NOT NULL,            -- metrics | events | rank | run_meta
    inode UBIGINT,
    size UBIGINT,                     -- size when last read
    "offset" UBIGINT NOT NULL DEFAULT 0,
    head VARCHAR,                     -- hex of the first bytes, to notice a rewritten file
    attempt INTEGER NOT NULL DEFAULT 0,
    last_step BIGINT,
    lines UBIGINT NOT NULL DEFAULT 0,
    mtime DOUBLE,
    state VARCHAR NOT NULL DEFAULT 'ok',  -- ok | unreadable | deleted
    crlf_reported BOOLEAN NOT NULL DEFAULT false,
    partial_reported UBIGINT,         -- offset of an unfinished line already reported
    updated_at TIMESTAMP
);

-- Metrics, one row per logged line, one column per key. Every key but the step, including
-- elapsed_s, time, epoch and buckets, becomes a column (ALTER TABLE ADD COLUMN) when a log
-- first carries it: DuckDB's bulk INSERT ... BY NAME slows down by half once three or more
-- table columns are missing from a chunk, and most logs lack time, epoch and buckets. Rows
-- keep file_id, not the run name: a VARCHAR per row cost 40% of a bulk insert.
CREATE TABLE metric_rows (
    attempt INTEGER NOT NULL,
    step BIGINT NOT NULL,
    file_id INTEGER NOT NULL
);

-- Every row of every attempt, with its run and line_id (its position in the order lines were
-- logged). The empty UNION branch supplies the columns queries rely on while no log has them
-- yet; the view is bound again at each query, so new metric columns appear in it at once.
CREATE VIEW metrics_all AS
SELECT f.run, m.*
FROM (
    SELECT rowid AS line_id, * FROM metric_rows
    UNION ALL BY NAME
    SELECT NULL::DOUBLE AS elapsed_s, NULL::DOUBLE AS "time", NULL::DOUBLE AS epoch,
           NULL::INTEGER[] AS buckets
    WHERE false
) AS m
JOIN files AS f USING (file_id);

-- Per-rank lines of multi-process runs (rank{N}.jsonl), same rules as metrics_all.
CREATE TABLE ranks_all (
    run VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    step BIGINT NOT NULL,
    elapsed_s DOUBLE,
    "time" DOUBLE,
    file_id INTEGER NOT NULL,
    ingested_at TIMESTAMP DEFAULT current_localtimestamp()
);

-- An attempt begins at a run's first line, at a step that does not increase (a resume), or
-- when metrics.jsonl is truncated or replaced.
CREATE TABLE attempts (
    run VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    start_step BIGINT NOT NULL,
    prev_step BIGINT,                 -- last step of the attempt before, if any
    reason VARCHAR NOT NULL,          -- start | step_back | file_truncated | file_replaced
    file_id INTEGER NOT NULL,
    started_at TIMESTAMP DEFAULT current_localtimestamp(),
    PRIMARY KEY (run, attempt)
);

CREATE TABLE events (
    run VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    step BIGINT,
    elapsed_s DOUBLE,
    "time" DOUBLE,
    data JSON,                        -- the whole event object
    file_id INTEGER NOT NULL,
    "offset" UBIGINT NOT NULL,
    ingested_at TIMESTAMP DEFAULT current_localtimestamp()
);

CREATE TABLE ingest_errors (
    run VARCHAR,
    file VARCHAR NOT NULL,            -- relative to the log directory
    "offset" UBIGINT,                 -- byte offset of the line in the file
    severity VARCHAR NOT NULL,        -- error: line not ingested | warning: kept, but odd
    reason VARCHAR NOT NULL,
    excerpt VARCHAR,
    recorded_at TIMESTAMP DEFAULT current_localtimestamp()
);

-- The current timeline of each run: a row is hidden once a later attempt resumed at or before
-- its step (the resumed run re-trains those steps). metrics_all keeps everything.
CREATE VIEW attempt_cutoffs AS
SELECT
    run,
    attempt,
    min(start_step) OVER (
        PARTITION BY run ORDER BY attempt DESC
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS cutoff_step
FROM attempts;

CREATE VIEW metrics AS
SELECT m.*
FROM metrics_all AS m
JOIN attempt_cutoffs AS c USING (run, attempt)
WHERE c.cutoff_step IS NULL OR m.step < c.cutoff_step;
