-- What-if tables (lab/whatif): edits of a step's context and the answers to the edited prompts.
-- Kept apart from runs/steps: a what-if answer is never part of a run's score.

CREATE TABLE IF NOT EXISTS whatif_edits (
    edit_id     VARCHAR PRIMARY KEY,   -- hash of step key + edits (lab.whatif.edit.WhatIf.edit_id)
    step_key    VARCHAR NOT NULL,      -- task-000/3
    fields      VARCHAR[] NOT NULL,    -- task | screen | system | turn:N
    edits       VARCHAR NOT NULL,      -- JSON list of {field, old, new}
    note        VARCHAR,
    created_by  VARCHAR,
    created_at  TIMESTAMP NOT NULL
);

CREATE SEQUENCE IF NOT EXISTS whatif_result_seq;
CREATE TABLE IF NOT EXISTS whatif_results (
    result_id         BIGINT PRIMARY KEY DEFAULT nextval('whatif_result_seq'),
    edit_id           VARCHAR NOT NULL,
    step_key          VARCHAR NOT NULL,
    engine_spec       VARCHAR NOT NULL,
    engine_name       VARCHAR NOT NULL,
    engine_kind       VARCHAR,
    model_id          VARCHAR,
    patch             VARCHAR,          -- unified diff of this engine's rendered prompt
    prompt_status     VARCHAR,
    prompt_tokens     INTEGER,
    raw_output        VARCHAR,
    pred_units        VARCHAR,          -- JSON list
    ref_units         VARCHAR,          -- JSON list
    metrics           VARCHAR,          -- JSON {first_cmd_exact, command_precision, command_recall, command_f1}
    command_f1        DOUBLE,
    valid_json        BOOLEAN,
    latency_s         DOUBLE,
    error             VARCHAR,
    answers_from_data BOOLEAN,
    created_at        TIMESTAMP NOT NULL
);
