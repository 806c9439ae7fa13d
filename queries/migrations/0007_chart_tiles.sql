-- title: Chart tiles
-- description: A rollup of each metrics file in tiles of a fixed number of consecutive lines
--   (app/read/tiles.py), so a chart of a 10,000,000-line run reads ~20,000 tiles instead of
--   every line. Only complete tiles are stored; the lines after a file's watermark are read
--   raw. Tiles and the watermark are written in one transaction: a crash never loses or
--   doubles a tile. metric_rows is append-only, so a stored tile never goes stale.

-- One row per (file, tile, attempt): where its lines are and what x they span. A tile that
-- holds the end of one attempt and the start of the next has one row for each.
CREATE TABLE chart_tiles (
    file_id INTEGER NOT NULL,
    tile BIGINT NOT NULL,             -- line index in the file // tile size
    attempt INTEGER NOT NULL,
    n BIGINT NOT NULL,                -- lines
    first_line BIGINT NOT NULL,       -- metric_rows rowid (metrics_all.line_id) of its first line
    last_line BIGINT NOT NULL,
    first_step BIGINT NOT NULL,
    last_step BIGINT NOT NULL,
    first_elapsed DOUBLE,             -- min and max elapsed_s and time of its lines
    last_elapsed DOUBLE,
    first_time DOUBLE,
    last_time DOUBLE,
    prev_step BIGINT,                 -- the attempt's line before first_line (NULL: none), so a
    prev_t DOUBLE                     -- raw read starting at this tile knows its first gap
);

-- One row per (file, tile, attempt, metric) with a value in it. The gaps between lines are
-- metrics "~gap_s" and "~gap_steps". lo/hi/sum cover finite values only.
CREATE TABLE chart_tile_values (
    file_id INTEGER NOT NULL,
    tile BIGINT NOT NULL,
    attempt INTEGER NOT NULL,
    metric VARCHAR NOT NULL,
    n BIGINT NOT NULL,                -- lines with a value (NaN and infinities included)
    nonfinite BIGINT NOT NULL,        -- lines whose value is NaN or infinite
    lo DOUBLE,
    hi DOUBLE,
    lo_step BIGINT,
    hi_step BIGINT,
    sum DOUBLE
);

-- How far each file is rolled (the watermark), and its last rolled line for the next gap.
CREATE TABLE chart_tile_marks (
    file_id INTEGER PRIMARY KEY,
    lines BIGINT NOT NULL,            -- lines rolled (a multiple of the tile size)
    last_line BIGINT NOT NULL,        -- rowid of the last rolled line
    last_attempt INTEGER,
    last_step BIGINT,
    last_t DOUBLE                     -- coalesce(elapsed_s, time) of that line
);
