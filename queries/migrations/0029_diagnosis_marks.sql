-- title: Diagnosis's marks: how far live diagnosis judged, and each run's detector state
-- description: Issue 23: a fresh server judged every run again at start (10,000 finished runs:
--   25 s before its Runs page was whole). Live diagnosis now keeps its marks here, written in
--   one transaction every few seconds and when the server stops: `diagnosis_marks`, one row,
--   the metric line id, event rowid and rank line rowid judged through, every run's, with the
--   version of the code and watch settings that judged them; `diagnosis_state`, per run, what
--   its detectors carry (app/diagnose/marks.py: recent lines, open incidents, a spike's
--   yardstick, the incidents and their windows), as of those marks. A restarted server of the
--   same version reads only what was stored after the marks, and a run's state only when it
--   has new lines, events or rank lines; another version judges every run from the start.
--   Neither table is offered to ad-hoc SQL's users as a metric; both are cliffwatch's own.

CREATE TABLE diagnosis_marks (
    one BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    version VARCHAR NOT NULL,
    last_line BIGINT NOT NULL,
    last_event BIGINT NOT NULL,
    last_rank_line BIGINT NOT NULL,
    saved_at TIMESTAMP NOT NULL
);

CREATE TABLE diagnosis_state (
    run VARCHAR PRIMARY KEY,
    state BLOB NOT NULL
);
