"""The tile worker, beside diagnosis: it writes chart tiles, each metrics file rolled up in
groups of ``TILE_LINES`` consecutive lines, so a chart of a 10,000,000-line run reads ~20,000
tiles per metric instead of every line (app/read/tiles.py and app/read/series.py read them).

A tile keeps, per attempt and metric, how many lines have a value, how many of those are NaN
or infinite, and the finite min and max (with their steps) and sum; ``chart_tiles`` says
where its lines are (rowids, first/last step, elapsed_s and time). The seconds and steps
since the attempt's previous line are metrics ``~gap_s`` and ``~gap_steps``, measured across
tile and chunk boundaries, so the 167 s checkpoint stall is exactly the max of its tile::

    chart_tile_values: file_id=1 tile=3 attempt=1 metric='~gap_s' n=512 nonfinite=0
                       lo=9.8 hi=167.2 lo_step=1540 hi_step=2000 sum=6261.4

Only complete tiles are stored; the lines after a file's watermark (``chart_tile_marks``) are
read raw (app/read/series.py). Each chunk (at most ``CHUNK_LINES``) is one transaction that
writes its tiles and moves the watermark: a crash loses or doubles nothing, and rolling again
after one gives the same tiles. metric_rows is only ever appended to (no statement of ours
deletes or updates it), so a stored tile never goes stale. The column list is read inside
the chunk's transaction: a metric column added by ingest later is rolled from the first
chunk that can see it, and earlier lines have no value in it anyway.
"""

from __future__ import annotations

import logging

from .background import Background
from .db import queries
from .read.tiles import GAPS, TILE_LINES, columns

log = logging.getLogger("cliffwatch.tiles")
CHUNK_LINES = 512 * 1024  # lines per transaction: well inside a 256MB memory_limit
IDLE_S = 2.0


def roll(db, *, chunk_lines: int = CHUNK_LINES, max_chunks: int | None = None) -> int:
    """Roll every metrics file's complete tiles, a chunk a transaction; returns lines rolled.
    ``max_chunks`` stops early (tests: a roll cut short, as by a kill between chunks)."""
    cursor = db.cursor()
    total = chunks = 0
    for mark in queries.execute(cursor, "read/tiles_files").fetchall():
        mark = list(mark)
        while max_chunks is None or chunks < max_chunks:
            done = roll_chunk(db, mark, chunk_lines)
            if not done:
                break
            total, chunks = total + done, chunks + 1
    return total


def roll_chunk(db, mark: list, chunk_lines: int = CHUNK_LINES) -> int:
    """Roll the next chunk of one file (``mark``: a tiles_files row, updated in place after
    the commit); returns its lines, 0 when less than a tile is waiting."""
    cursor = db.cursor()
    file_id, rolled, after = mark[0], mark[1], mark[2]
    pending = queries.execute(cursor, "read/tiles_pending",
                              {"file": file_id, "after": after}).fetchall()[0][0]
    lines = min(pending, chunk_lines) // TILE_LINES * TILE_LINES
    if not lines:
        return 0
    upto = queries.execute(cursor, "read/tiles_bound", {"file": file_id, "after": after,
                                                        "lines": lines}).fetchall()[0][0]
    params = {"file": file_id, "after": after, "upto": upto, "prev_attempt": mark[3],
              "prev_step": mark[4], "prev_t": mark[5]}
    cursor.begin()
    try:
        # read in this transaction: the rows and the columns it sees agree
        params["metrics"] = columns(cursor) + list(GAPS)
        tiles = {**params, "base": rolled, "tile": TILE_LINES}
        # Each statement reads the chunk with the same CTE: one temporary table shared by
        # the three was slower (3,000,000 lines rolled in 4.6 s against 3.3 s; measured once)
        queries.execute(cursor, "read/tiles_roll_lines", tiles)
        queries.execute(cursor, "read/tiles_roll_values", tiles)
        queries.execute(cursor, "read/tiles_mark", {**params, "lines": rolled + lines})
        cursor.commit()
    except BaseException:
        db.rollback(cursor)
        raise
    mark[:] = marks(cursor, [file_id])[0]
    return lines


def marks(cursor, files: list[int]) -> list[list]:
    """The tiles_files rows of these files only."""
    return [list(r) for r in queries.execute(cursor, "read/tiles_marks",
                                             {"files": files}).fetchall()]


class TileWorker(Background):
    """Rolls new complete tiles after ingest pokes it (``worker.listeners.append(
    tiles.poke)``), a chunk a transaction, in its own thread: ingest never waits for it.

    Its cost follows what is new, not how many files there are: it starts with the files that
    have a tile's worth of lines waiting (one query), then keeps the newest rowid it has seen
    and each pass asks only which files got lines past it (a pass with nothing new reads no
    stored block). A file stays on its list until it has less than a tile waiting."""

    what = "chart tiles"
    log = log

    def __init__(self, db):
        self.listeners: list = []  # called (in this thread) after tiles were stored
        self.since: int | None = None  # the newest rowid seen; None: not started
        self.due: set[int] = set()  # files that may have a tile's worth of lines to roll
        super().__init__("cliffwatch-tiles", db)

    def _loop(self) -> None:
        while not self.stopping:
            if self.reopened():
                self.since = None  # the marks are read again from the database opened again
            try:
                rolled = self._pass()
            except Exception as exc:  # the thread must go on
                self.failed(exc)
                self.since = None  # look at every file again: nothing is missed
                rolled = 0
            else:
                self.recovered()
            for listener in self.listeners if rolled else ():
                listener()
            if not rolled:  # more may be waiting right away after a full chunk
                self.wake.wait(IDLE_S)
                self.wake.clear()

    def _pass(self) -> int:
        """One chunk per file at most, so stop() is seen between chunks."""
        cursor = self.db.cursor()
        self._look(cursor)
        total = 0
        waiting = marks(cursor, sorted(self.due)) if self.due else []
        self.due = {mark[0] for mark in waiting}  # files that are not charted leave the list
        for mark in waiting:
            if self.stopping:
                break
            done = roll_chunk(self.db, mark)
            if not done:
                self.due.discard(mark[0])
            total += done
        return total

    def _look(self, cursor) -> None:
        """Add the files that got lines since the last look to ``due``."""
        if self.since is None:
            newest = queries.execute(cursor, "read/tiles_newest").fetchall()[0][0]
            found = queries.execute(cursor, "read/tiles_due", {"tile": TILE_LINES}).fetchall()
            self.due = {file_id for (file_id,) in found}
            self.since = newest
            return
        for file_id, newest in queries.execute(cursor, "read/tiles_changed",
                                               {"since": self.since}).fetchall():
            self.due.add(file_id)
            self.since = max(self.since, newest)
