"""PyTorch Lightning's CSVLogger metrics.csv (app/ingest/formats/csvlog.py): a small fixture
(tests/data/lightning/), its rewrite with a new column through the real tailer, and the real
YOLOv3 run of ../shared/realdata."""

from __future__ import annotations

import shutil
from pathlib import Path

from app.ingest.formats import EVAL, TRAIN, csvlog, detect
from tests.app.test_ingest_bad_input import ingest, query
from tests.conftest import SHARED, needs_realdata

FIXTURE = Path(__file__).parents[1] / "data" / "lightning" / "metrics.csv"
REAL = SHARED / "realdata" / "lightning-yolov3-csv"


def test_rows_of_one_step_are_one_row_and_validation_goes_apart():
    records, problems, rows = csvlog.parse(FIXTURE.read_bytes())
    assert (problems, rows) == ([], 21)
    train = [r.data for r in records if r.kind == TRAIN]
    assert [r["step"] for r in train] == [9, 19, 29, 39, 49, 59, 69, 79, 89]
    assert train[0] == {"lr-Adam": 1e-4, "step": 9, "train_loss": 2.7, "epoch": 0}
    assert next(r.data for r in records if r.kind == EVAL) == {
        "step": 29, "epoch": 0, "val_loss": 2.5, "val_acc": 0.5}
    records, _, _ = csvlog.parse(FIXTURE.read_bytes(), skip=19)
    assert [(r.kind, r.data["step"]) for r in records] == [(TRAIN, 89), (EVAL, 89)]


def test_detected_by_its_header():
    assert detect.detect("metrics.csv", FIXTURE.read_bytes())[0] == detect.CSV
    assert detect.detect("metrics.csv", b"lr-Adam,step")[0] == detect.PENDING
    assert detect.detect("metrics.csv", b"a,b\n1,2\n")[0] is None
    assert detect.detect("data.csv", FIXTURE.read_bytes())[0] is None  # a dataset, perhaps


def test_a_rewrite_with_a_new_column_stores_only_the_new_rows(tmp_path):
    run = tmp_path / "logs" / "yolo" / "version_0"
    run.mkdir(parents=True)
    lines = FIXTURE.read_text().splitlines()
    (run / "metrics.csv").write_text("\n".join(lines[:15]) + "\n")
    with ingest(tmp_path / "logs") as mon:
        assert query(mon, "SELECT count(*), max(step) FROM metrics_all") == [(6, 59)]
        # Lightning rewrites the whole file when a key appears: a new column at the end
        wide = [lines[0] + ",test_acc"] + [line + "," for line in lines[1:]]
        (run / "metrics.csv").write_text("\n".join([*wide, ",90,,3,,,0.77"]) + "\n")
        mon.tailer.catch_up()
        mon.tailer.tick(discover=True)
        assert query(mon, "SELECT count(*), min(step), max(step) FROM metrics_all") == [
            (9, 9, 89)]
        assert query(mon, "SELECT step, test_acc FROM evals WHERE test_acc IS NOT NULL") == [
            (90, 0.77)]
        assert query(mon, "SELECT reason FROM attempts") == [("start",)]
        assert query(mon, "SELECT reason FROM ingest_errors") == []


@needs_realdata
def test_the_real_yolov3_run(tmp_path):
    # 1,529 rows, 40 epochs, train_loss every 50 steps (744 values, steps 49-37,199)
    # 45.9 -> 3.40; val class accuracy 34 -> 90 %; a test row at the end
    shutil.copytree(REAL, tmp_path / "logs" / REAL.name)
    with ingest(tmp_path / "logs") as mon:
        mon.tailer.catch_up()
        assert query(mon, "SELECT count(*), min(step), max(step), round(first(train_loss "
                          "ORDER BY step), 1), round(last(train_loss ORDER BY step), 2) "
                          "FROM metrics_all") == [(744, 49, 37199, 45.9, 3.4)]
        assert query(mon, "SELECT count(*), round(first(val_Class_Accuracy ORDER BY step)), "
                          "round(last(val_Class_Accuracy ORDER BY step)) FROM evals "
                          "WHERE val_Class_Accuracy IS NOT NULL") == [(40, 34, 90)]
        assert query(mon, "SELECT step FROM evals WHERE test_Class_Accuracy IS NOT NULL"
                     ) == [(37240,)]
        assert query(mon, "SELECT reason FROM attempts") == [("start",)]
        assert query(mon, "SELECT reason FROM ingest_errors") == []
