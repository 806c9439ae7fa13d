-- title: Alerts
-- description: Alert rule states per (rule, run, metric) with every transition, silences,
--   the notification outbox and every delivery attempt (docs/alerts.md). Times are Unix
--   seconds (DOUBLE), like the logs' own `time`; `to_timestamp(time)` shows them as dates.

CREATE TABLE alert_states (
    rule VARCHAR NOT NULL,
    run VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,          -- '' for a rule about the whole run (stall)
    state VARCHAR NOT NULL,           -- inactive | pending | firing | resolved
    episode INTEGER NOT NULL,         -- how many times it has fired: part of notification keys
    changed_time DOUBLE NOT NULL,     -- when `state` was entered
    changed_step BIGINT,              -- the step that made it change (a stall: the run's last)
    pending_time DOUBLE,              -- when the condition started holding
    pending_lines INTEGER NOT NULL DEFAULT 0,  -- lines it has held for
    value DOUBLE,                     -- the value that made it change
    notified_time DOUBLE,             -- last firing/repeat notification sent (not silenced)
    detail VARCHAR,                   -- JSON: what the rule saw (typical value, checkpoint, ...)
    repeats INTEGER NOT NULL DEFAULT 0,  -- repeat notifications sent in this episode (their keys)
    PRIMARY KEY (rule, run, metric)
);

CREATE SEQUENCE alert_transition_ids;
CREATE TABLE alert_transitions (
    id BIGINT PRIMARY KEY DEFAULT nextval('alert_transition_ids'),
    rule VARCHAR NOT NULL,
    run VARCHAR NOT NULL,
    metric VARCHAR NOT NULL,
    from_state VARCHAR NOT NULL,
    to_state VARCHAR NOT NULL,
    time DOUBLE NOT NULL,
    step BIGINT,
    value DOUBLE
);

-- how far each run's lines have been judged by the rules (restart-safe, with the states)
CREATE TABLE alert_progress (
    run VARCHAR PRIMARY KEY,
    last_line BIGINT NOT NULL,        -- metrics_all.line_id judged up to
    seen TIMESTAMP,                   -- runs.last_seen when judged: a later one means new lines
    first_time DOUBLE NOT NULL,       -- when the rules first met the run
    history_step BIGINT               -- the run was silent long before it was met: its lines up
                                      -- to this step are history, never alerted on (NULL: none)
);

CREATE SEQUENCE silence_ids;
CREATE TABLE silences (
    id BIGINT PRIMARY KEY DEFAULT nextval('silence_ids'),
    rule VARCHAR NOT NULL,            -- glob on rule names
    run VARCHAR NOT NULL,             -- glob on run names
    created_time DOUBLE NOT NULL,
    until_time DOUBLE NOT NULL,
    ended_time DOUBLE,                -- set by `alerts unsilence`
    comment VARCHAR
);

-- The outbox: a notification is written in the same transaction as the state change that
-- caused it, with one `outbox` row per webhook; the delivery worker sends them.
CREATE SEQUENCE notification_ids;
CREATE TABLE notifications (
    id BIGINT PRIMARY KEY DEFAULT nextval('notification_ids'),
    key VARCHAR NOT NULL UNIQUE,      -- stable id, sent as Idempotency-Key
    rule VARCHAR NOT NULL,
    run VARCHAR,
    metric VARCHAR,
    kind VARCHAR NOT NULL,            -- firing | repeat | resolved | test
    severity VARCHAR NOT NULL,        -- critical | warning | info
    created_time DOUBLE NOT NULL,
    silenced BOOLEAN NOT NULL DEFAULT false,  -- a silence matched: kept, never sent
    facts VARCHAR NOT NULL            -- JSON: what the message says (docs/alerts.md)
);

CREATE TABLE outbox (
    notification_id BIGINT NOT NULL,
    target VARCHAR NOT NULL,          -- webhook id (never its URL), or 'log' with no webhook
    status VARCHAR NOT NULL,          -- pending | sent | failed | expired
    attempts INTEGER NOT NULL DEFAULT 0,
    next_time DOUBLE NOT NULL,        -- not before (backoff, Retry-After)
    done_time DOUBLE,
    PRIMARY KEY (notification_id, target)
);

CREATE SEQUENCE delivery_ids;
CREATE TABLE deliveries (
    id BIGINT PRIMARY KEY DEFAULT nextval('delivery_ids'),
    notification_id BIGINT NOT NULL,
    target VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    time DOUBLE NOT NULL,
    outcome VARCHAR NOT NULL,         -- sent | retry | failed
    http_status INTEGER,
    error VARCHAR,                    -- what went wrong, or the body Slack answered a 4xx with
    elapsed_ms DOUBLE
);
