-- title: Runs table tail
-- description: A run's newest lines, read as one bounded rowid range of its newest metrics
--   file (`lo`..`hi`, the rowid bound pushed into the scan): the step, attempt, loss and
--   accuracy of the newest line (the newest non-NULL loss and accuracy in the range), and
--   the pace: lines of the newest attempt in its last `window_s` seconds (by elapsed_s, else
--   time) and the seconds they span (when the range holds fewer lines than that window, the
--   pace over the lines it holds), and how many lines the range holds.
-- param file: file id (example: 2)
-- param lo: first rowid of the range (example: 0)
-- param hi: last rowid of the range (example: 100000)
-- param window_s: seconds of the log's clock the pace is measured over (default: 300) (example: 300.0)
WITH lines AS (
    SELECT line_id, attempt, step, line_clock(elapsed_s, "time") AS t, loss, accuracy
    FROM (
        SELECT rowid AS line_id, * FROM metric_rows
        WHERE file_id = $file AND rowid BETWEEN $lo AND $hi
        UNION ALL BY NAME  -- loss, accuracy, elapsed_s and time only once a log has them
        SELECT NULL::DOUBLE AS loss, NULL::DOUBLE AS accuracy, NULL::DOUBLE AS elapsed_s,
               NULL::DOUBLE AS "time"
        WHERE false
    )
), latest AS (
    SELECT count(*) AS lines, arg_max(step, line_id) AS last_step,
           arg_max(attempt, line_id) AS last_attempt,
           arg_max(loss, line_id) FILTER (WHERE loss IS NOT NULL) AS last_loss,
           arg_max(accuracy, line_id) FILTER (WHERE accuracy IS NOT NULL) AS last_accuracy
    FROM lines
), newest AS (
    SELECT l.* FROM lines AS l, latest AS a WHERE l.attempt = a.last_attempt
), ends AS (
    SELECT max(t) AS end_t FROM newest
), pace AS (
    SELECT count(*) AS n, max(n.t) - min(n.t) AS span_s
    FROM newest AS n, ends AS e
    WHERE n.t >= e.end_t - coalesce($window_s, 300)
)
SELECT a.lines, a.last_step, a.last_attempt, a.last_loss, a.last_accuracy, p.n, p.span_s
FROM latest AS a, pace AS p
