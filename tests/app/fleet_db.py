"""A team's runs folder in a database, quickly: runs ingested for real by the tailer, then one
of them copied row for row (runs, files, metric_rows, attempts, events) under ``n`` new names,
as if ingest had stored each one. Ingesting 2,000 folders of 20 lines through the tailer took
203 s (issue 12: the catch-up of many small files); copying takes well under a second.

    fleet_db.copy_run(cursor, "done", n=2000)   # runs fleet/run-00000 ... fleet/run-01999
"""

from __future__ import annotations

FLEET = "fleet/run-"

# One statement per table; $src is the run copied, $n the copies; each copy's file ids follow
# the source's in the same order, above every id in use.
COPY = [
    """CREATE OR REPLACE TEMP TABLE copies AS
       SELECT i, printf('{prefix}%05d', i) AS run FROM range($n) AS t(i)""",
    """CREATE OR REPLACE TEMP TABLE file_map AS
       SELECT f.file_id AS old_id, c.run, c.i, f.path,
              (SELECT max(file_id) FROM files) + row_number() OVER (ORDER BY c.i, f.file_id)
                  AS new_id
       FROM files AS f, copies AS c WHERE f.run = $src""",
    """INSERT INTO runs BY NAME
       SELECT r.* REPLACE (c.run AS run) FROM runs AS r, copies AS c WHERE r.run = $src""",
    """INSERT INTO files BY NAME
       SELECT f.* REPLACE (m.new_id AS file_id, m.run AS run,
                         m.run || substr(f.path, length($src) + 1) AS path)
       FROM files AS f JOIN file_map AS m ON m.old_id = f.file_id""",
    """INSERT INTO metric_rows BY NAME
       SELECT r.* REPLACE (m.new_id AS file_id)
       FROM metric_rows AS r JOIN file_map AS m ON m.old_id = r.file_id
       ORDER BY m.new_id, r.rowid""",
    """INSERT INTO attempts BY NAME
       SELECT a.* REPLACE (m.run AS run, m.new_id AS file_id)
       FROM attempts AS a JOIN file_map AS m ON m.old_id = a.file_id""",
    """INSERT INTO events BY NAME
       SELECT e.* REPLACE (m.run AS run, m.new_id AS file_id)
       FROM events AS e JOIN file_map AS m ON m.old_id = e.file_id""",
]


def copy_run(cursor, src: str, n: int, prefix: str = FLEET) -> None:
    """``n`` copies of run ``src`` named ``prefix`` + 00000...; one transaction."""
    cursor.begin()
    try:
        for sql in COPY:
            params = {k: v for k, v in {"src": src, "n": n}.items() if "$" + k in sql}
            cursor.execute(sql.replace("{prefix}", prefix), params)
        cursor.execute("SELECT setval('file_ids', (SELECT max(file_id) FROM files))")
        cursor.commit()
    except BaseException:
        cursor.rollback()
        raise
