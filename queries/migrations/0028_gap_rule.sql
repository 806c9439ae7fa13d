-- title: The gap rule, written once
-- description: The seconds and steps between a line and the one logged before it were
--   restated in six places (line_gaps, the stall rule's typical interval, the rank step
--   times and the three tile queries, issue 22). They are these macros now, stored in the
--   database so every query (and ad-hoc SQL) reads the same rule:
--   - `line_clock(elapsed_s, "time")`: a line's seconds, elapsed_s where logged, else its
--     Unix time (a log may carry either; the detector's clock, app/diagnose/load.py, is the
--     same);
--   - `line_before(x, stream, attempt, line)`: x of the line logged before, in the same
--     stream (a run, a file, a rank) and attempt: a restart's first line has no gap, so a
--     resume's downtime is no stall;
--   - `line_gap(x, stream, attempt, line)`: x minus that;
--   - `line_before_or(x, attempt, line, carried_attempt, carried_x)`: the same for a chunk of
--     one file read after a line it does not hold (tiles, chart series): its attempt's first
--     line in the chunk takes the carried line's x if that line is of its attempt.
--   Scalar macros, not a table macro: each query keeps its own scan and filters (a rowid
--   range pushed into the scan), and the macros expand to the window they always had.
--   line_gaps is defined again on them, with the same columns.

CREATE MACRO line_clock(elapsed_s, unix_time) AS coalesce(elapsed_s, unix_time);

CREATE MACRO line_before(x, stream, attempt, line) AS
    lag(x) OVER (PARTITION BY stream, attempt ORDER BY line);

CREATE MACRO line_gap(x, stream, attempt, line) AS
    x - line_before(x, stream, attempt, line);

-- `lag(line) IS NOT NULL`, not `lag(x)`: a line before whose x is NULL (no time field) is
-- still the line before, and the carried one is not. A chunk is of one file, so its attempt
-- alone is the partition: a constant stream key (NULL, the file) is still a sort key, and
-- doubled the window's time (2M lines, 0.9 s to 1.8 s).
CREATE MACRO line_before_or(x, attempt, line, carried_attempt, carried_x) AS
    CASE WHEN lag(line) OVER (PARTITION BY attempt ORDER BY line) IS NOT NULL
         THEN lag(x) OVER (PARTITION BY attempt ORDER BY line)
         WHEN attempt = carried_attempt THEN carried_x END;

CREATE OR REPLACE VIEW line_gaps AS
SELECT
    run,
    attempt,
    line_id,
    step,
    line_before(step, run, attempt, line_id) AS prev_step,
    line_clock(elapsed_s, "time") AS t,
    line_gap(line_clock(elapsed_s, "time"), run, attempt, line_id) AS gap_s,
    line_gap(step, run, attempt, line_id) AS steps
FROM metrics_all;
