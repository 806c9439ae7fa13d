-- title: Runs table files
-- description: The line files of the runs named, with how far their chart tiles go (lines
--   rolled and the rowid of the last rolled line; 0 and -1 when not rolled): a file's lines
--   are its rolled lines plus those after that rowid, so counting them reads only the rest.
--   Its attempt, bytes and lines consumed and when ingest last committed it say whether
--   anything was stored since (ingest commits them with the rows).
-- param runs: run ids (example: ['seed-cliff'])
SELECT f.run, f.file_id, coalesce(m.lines, 0) AS rolled, coalesce(m.last_line, -1) AS after,
       f.attempt, f."offset" AS bytes, f.lines AS consumed, f.updated_at
FROM line_files AS f
LEFT JOIN chart_tile_marks AS m USING (file_id)
WHERE list_contains($runs, f.run)
ORDER BY f.run, f.file_id
