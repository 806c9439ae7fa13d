-- title: Incidents
-- description: What live detection found, one row per incident, updated as its episode grows.

CREATE TABLE incidents (
    run VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,            -- stall | spike | cliff | nonfinite
    metric VARCHAR NOT NULL,          -- the metric, or interval_s for a stall
    step BIGINT NOT NULL,             -- first affected logged step
    end_step BIGINT NOT NULL,         -- last affected logged step so far
    value DOUBLE,                     -- the metric at `step` (the interval for a stall)
    baseline DOUBLE,                  -- its recent typical level
    causes VARCHAR[],                 -- most likely first
    evidence VARCHAR[],               -- one sentence per cause
    detected_at TIMESTAMP DEFAULT current_localtimestamp(),
    updated_at TIMESTAMP DEFAULT current_localtimestamp(),
    PRIMARY KEY (run, kind, metric, step)
);
