-- Triage tables (lab/triage), created beside the store's runs/steps tables.

-- Per-step fields computed from the raw output (failure taxonomy, risk flags), one row per
-- run x step, materialized on import/refresh so that every slice is a plain SQL query.
CREATE TABLE IF NOT EXISTS step_flags (
    run_id VARCHAR NOT NULL,
    step_key VARCHAR NOT NULL,
    failure_kind VARCHAR,
    invalid_json BOOLEAN,
    prose_around_json BOOLEAN,
    missing_fields BOOLEAN,
    wrong_types BOOLEAN,
    empty_commands BOOLEAN,
    truncated BOOLEAN,
    units_from_fallback BOOLEAN,
    text_complete BOOLEAN,
    strict_f1 DOUBLE,
    risky BOOLEAN,
    hang BOOLEAN,
    no_newline BOOLEAN,
    long_duration BOOLEAN,
    flags VARCHAR[],
    PRIMARY KEY (run_id, step_key)
);

-- Tags and notes on any step of any run, with who and when.
CREATE SEQUENCE IF NOT EXISTS annotation_id_seq;
CREATE TABLE IF NOT EXISTS annotations (
    id BIGINT PRIMARY KEY DEFAULT nextval('annotation_id_seq'),
    run_id VARCHAR NOT NULL,
    step_key VARCHAR NOT NULL,
    tag VARCHAR NOT NULL,
    note VARCHAR,
    author VARCHAR,
    created_at TIMESTAMP NOT NULL
);

-- Named slices (SliceSpec as JSON) that can be reopened and shared.
CREATE TABLE IF NOT EXISTS saved_slices (
    name VARCHAR PRIMARY KEY,
    spec_json VARCHAR NOT NULL,
    author VARCHAR,
    created_at TIMESTAMP NOT NULL
);
