-- title: Metric rows without the run name
-- description: Writing the run name into every row was 40% of a bulk insert's time (a VARCHAR
--   per row). Rows now keep only file_id; metrics_all is a view that joins the run name from
--   files and exposes each row's line_id (its rowid: the order lines were logged in).

DROP VIEW metrics;
DROP VIEW line_gaps;
ALTER TABLE metrics_all RENAME TO metric_rows;
ALTER TABLE metric_rows DROP COLUMN run;

CREATE VIEW metrics_all AS
SELECT f.run, m.rowid AS line_id, m.*
FROM metric_rows AS m
JOIN files AS f USING (file_id);

CREATE VIEW metrics AS
SELECT m.*
FROM metrics_all AS m
JOIN attempt_cutoffs AS c USING (run, attempt)
WHERE c.cutoff_step IS NULL OR m.step < c.cutoff_step;

CREATE VIEW line_gaps AS
SELECT
    run,
    attempt,
    line_id,
    step,
    lag(step) OVER w AS prev_step,
    coalesce(elapsed_s, "time") AS t,
    coalesce(elapsed_s, "time") - lag(coalesce(elapsed_s, "time")) OVER w AS gap_s,
    step - lag(step) OVER w AS steps
FROM metrics_all
WINDOW w AS (PARTITION BY run, attempt ORDER BY line_id);
