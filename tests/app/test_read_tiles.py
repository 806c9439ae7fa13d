"""Chart tiles (app/tiler.py): a roll cut short and resumed, late columns, exact sums."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from app import tiler
from app.read import series as S
from tests.app.test_read_series import open_monitor
from tests.conftest import wait_for

TABLES = ("chart_tiles", "chart_tile_values", "chart_tile_marks")


def write_lines(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def dump(monitor) -> dict[str, pd.DataFrame]:
    cursor = monitor.db.cursor()
    return {t: cursor.sql(f"SELECT * FROM {t} ORDER BY ALL").df() for t in TABLES}


def rows(first: int, last: int, **extra) -> list[dict]:
    return [{"step": s, "loss": (s * 37 % 101) / 8, "elapsed_s": s * 0.25, **extra}
            for s in range(first, last + 1)]


def test_roll_cut_short_then_resumed_gives_the_same_tiles(tmp_path):
    """A kill between chunks leaves the watermark at the last committed chunk: rolling again
    goes on from there, and the tiles equal those of one uninterrupted roll."""
    for name in ("cut", "whole"):
        write_lines(tmp_path / name / "r" / "metrics.jsonl", rows(1, 5000))
    cut, whole = open_monitor(tmp_path / "cut"), open_monitor(tmp_path / "whole")
    try:
        assert tiler.roll(cut.db, chunk_lines=1024, max_chunks=1) == 1024
        assert tiler.roll(cut.db, chunk_lines=1024) == 4608 - 1024
        assert tiler.roll(cut.db) == 0  # nothing twice
        assert tiler.roll(whole.db) == 4608
        for table, frame in dump(cut).items():
            pd.testing.assert_frame_equal(frame, dump(whole)[table], obj=table)
    finally:
        cut.close()
        whole.close()


def test_tile_sums_are_exact_and_a_late_column_is_rolled(tmp_path):
    path = tmp_path / "logs" / "r" / "metrics.jsonl"
    write_lines(path, rows(1, 1500))
    monitor = open_monitor(tmp_path / "logs")
    try:
        tiler.roll(monitor.db)
        write_lines(path, rows(1501, 3100, grad_norm=0.5))  # a column from step 1501 on
        monitor.tailer.catch_up()
        tiler.roll(monitor.db)
        cursor = monitor.db.cursor()
        got = cursor.sql("SELECT tile, metric, n, lo, hi, sum FROM chart_tile_values "
                         "WHERE metric IN ('loss', 'grad_norm') ORDER BY ALL").df()
        lines = pd.DataFrame(rows(1, 3072))
        lines["tile"] = (lines["step"] - 1) // tiler.TILE_LINES
        want = lines.groupby("tile")["loss"].agg(["count", "min", "max", "sum"])
        loss = got[got["metric"] == "loss"].set_index("tile")
        assert loss["n"].tolist() == want["count"].tolist()
        assert loss[["lo", "hi", "sum"]].values.tolist() == want[["min", "max", "sum"]
                                                                  ].values.tolist()
        grad = got[got["metric"] == "grad_norm"]
        assert grad["tile"].tolist() == [2, 3, 4, 5] and grad["n"].tolist() == [
            3 * 512 - 1500, 512, 512, 512]
        assert "grad_norm" in S.metric_names(cursor, "r")
        frame = S.series(cursor, "r", ["grad_norm"], points=100).frame
        assert frame["step"].min() == 1501 and frame["n"].sum() == 1600
    finally:
        monitor.close()


def test_tile_worker_rolls_after_a_poke(tmp_path):
    write_lines(tmp_path / "logs" / "r" / "metrics.jsonl", rows(1, 2100))
    monitor = open_monitor(tmp_path / "logs")
    worker = tiler.TileWorker(monitor.db)
    try:
        worker.start()
        worker.poke()
        wait_for(lambda: monitor.db.cursor().sql(
            "SELECT lines FROM chart_tile_marks").fetchall() == [(2048,)], timeout=10)
    finally:
        worker.stop()
        monitor.close()
