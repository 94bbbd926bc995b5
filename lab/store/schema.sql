-- The lab's DuckDB schema (core tables, owned by lab.store).
-- Bump schema_version when anything below changes: a store with an older version is
-- rebuilt from results/ on open (the CSV figures and every result JSON found there).
-- schema_version: 9

-- The 116 published TB2-lite (corrected 303-step) leaderboard rows: results/leaderboard_corrected.csv.
CREATE TABLE leaderboard (
    row_no              INTEGER PRIMARY KEY,   -- 1-based row of the CSV (56 snapshot rows first)
    rank                INTEGER,               -- rank in the 56-row 2026-05-08 snapshot; NULL for later rows
    rank_latest         INTEGER,               -- rank in the 116-row 2026-06-18 ranking
    in_first_56         BOOLEAN NOT NULL,
    model_label         VARCHAR NOT NULL,      -- the exact table text
    model_id            VARCHAR,               -- HF repo id; NULL where the row names none
    variant             VARCHAR,
    model_short         VARCHAR,
    model_short_basis   VARCHAR,
    family              VARCHAR,
    params_b            DOUBLE,
    active_params_b     DOUBLE,
    training            VARCHAR,               -- as published (derived from names)
    training_method     VARCHAR,               -- coarse method for plots (name_rules.yaml)
    epochs              INTEGER,
    checkpoint_step     INTEGER,               -- from "checkpoint-N" in the label
    score               DOUBLE,                -- 100 x avg_command_f1
    score_text          VARCHAR,               -- verbatim (keeps "48.19*", "~33*")
    score_marked        BOOLEAN NOT NULL,      -- starred / approximate in the source: not a plain 303-step result
    avg_command_f1      DOUBLE,
    precision           DOUBLE,
    recall              DOUBLE,
    first_cmd_exact_pct DOUBLE,
    valid_json_pct      DOUBLE,
    steps               INTEGER,
    tasks               INTEGER,
    sec_per_step        DOUBLE,
    load_s              DOUBLE,
    template_status     VARCHAR,
    rank_eligible       BOOLEAN,
    eval_timestamp      VARCHAR,
    source_file         VARCHAR,
    upstream_source     VARCHAR,
    upstream_file       VARCHAR,
    notes               VARCHAR
);

-- TB Lite / Terminal-Bench 2.1 (a different benchmark, other scale): results/tblite_tmax.csv.
CREATE TABLE tblite (
    row_no          INTEGER PRIMARY KEY,
    model           VARCHAR NOT NULL,
    model_id        VARCHAR,
    base_model      VARCHAR,
    training        VARCHAR,
    dataset         VARCHAR,
    tb_lite         DOUBLE,
    tb_lite_spread  DOUBLE,
    tb21            DOUBLE,
    tb21_spread     DOUBLE,
    source          VARCHAR
);

-- The pre-correction 386-step table: never comparable with the corrected scores.
CREATE TABLE legacy_leaderboard (
    row_no              INTEGER PRIMARY KEY,
    rank                INTEGER,
    model_label         VARCHAR NOT NULL,
    legacy_score        DOUBLE,                -- 100 x (0.7 F1 + 0.3 first-exact)
    avg_command_f1      DOUBLE,
    first_cmd_exact_pct DOUBLE,
    sec_per_step        DOUBLE,
    load_s              DOUBLE,
    source_file         VARCHAR,
    scoring_version     VARCHAR NOT NULL DEFAULT 'legacy_386',
    comparable          BOOLEAN NOT NULL DEFAULT FALSE
);

-- The only published per-bucket / per-source-group figures (4 LFM checkpoints).
CREATE TABLE leaderboard_groups (
    row_no              INTEGER PRIMARY KEY,
    model               VARCHAR NOT NULL,
    model_label         VARCHAR,
    group_type          VARCHAR NOT NULL,      -- replay_position_bucket | source_group_top3_listed | source_group_bottom3_listed
    group_name          VARCHAR NOT NULL,
    steps               INTEGER,
    avg_command_f1      DOUBLE,
    first_cmd_exact_pct DOUBLE,
    source_file         VARCHAR
);

-- One row per imported result file.
CREATE TABLE runs (
    run_id                      VARCHAR PRIMARY KEY,   -- short sha1 of the file content
    path                        VARCHAR NOT NULL,      -- relative to the results dir when inside it
    file_size                   BIGINT,
    file_mtime                  DOUBLE,
    model                       VARCHAR,
    model_path                  VARCHAR,
    model_id                    VARCHAR,               -- HF id used to join the leaderboard
    display_name                VARCHAR NOT NULL,
    model_short                 VARCHAR,
    lora_path                   VARCHAR,
    scoring_version             VARCHAR NOT NULL,      -- corrected_303 | legacy_386
    steps                       INTEGER NOT NULL,
    tasks                       INTEGER NOT NULL,
    score                       DOUBLE,                -- 100 x avg_command_f1
    avg_command_f1              DOUBLE,
    avg_command_precision       DOUBLE,
    avg_command_recall          DOUBLE,
    first_cmd_exact_pct         DOUBLE,
    valid_json_pct              DOUBLE,
    has_analysis_pct            DOUBLE,
    has_plan_pct                DOUBLE,
    avg_ref_cmds                DOUBLE,
    avg_pred_cmds               DOUBLE,
    complete_true_recall_pct    DOUBLE,
    premature_complete_rate_pct DOUBLE,
    next_action_score           DOUBLE,
    avg_sec_per_step            DOUBLE,
    load_time_sec               DOUBLE,
    gen_time_sec                DOUBLE,
    template_status             VARCHAR NOT NULL DEFAULT 'unknown',
    rank_eligible               BOOLEAN NOT NULL DEFAULT TRUE,
    timestamp                   VARCHAR,
    gpu                         VARCHAR,
    engine_spec                 VARCHAR,
    contract                    VARCHAR,
    source                      VARCHAR NOT NULL DEFAULT 'file',
    family                      VARCHAR,
    params_b                    DOUBLE,
    active_params_b             DOUBLE,
    training                    VARCHAR,
    training_method             VARCHAR,
    epochs                      INTEGER,
    checkpoint_step             INTEGER,
    meta_json                   VARCHAR,               -- top-level fields other than per_step/aggregate
    aggregate_json              VARCHAR,
    imported_at                 TIMESTAMP NOT NULL,
    -- equiv_f1, the lab's shell-aware second opinion: NOT the published score (lab/scoring/equiv)
    avg_equiv_f1                DOUBLE,                -- mean of steps.equiv_f1
    equiv_score                 DOUBLE,                -- 100 x avg_equiv_f1
    spelling_gap                DOUBLE,                -- equiv_score - score (points lost to spelling)
    -- coverage: how much of the replay it was made on the run answered (2 of a 14-step replay: 2/14); a run
    -- whole on a replay smaller than the full set is named "[14-step replay]" (not a 303-step score)
    -- a run whose steps were limited on purpose (--limit, --tasks, the training callback's limit=) is counted
    -- against that selection: "[limited to 2 steps]", complete, not "[partial 2/14]"
    total_steps                 INTEGER,               -- total_input_steps, else selected_steps, else replay_steps, else 303 / 386 (legacy)
    coverage                    DOUBLE,                -- steps / total_steps (0-1)
    selected_steps              INTEGER,               -- the steps of a selection limited on purpose; NULL: none
    num_shards                  INTEGER,               -- a shard file's num_shards (NULL: not sharded)
    shard_index                 INTEGER,
    partial                     BOOLEAN NOT NULL DEFAULT FALSE, -- coverage < 1 or one shard of several
    -- the equiv columns (runs.avg_equiv_f1/equiv_score/spelling_gap, steps.equiv_*) are filled after the
    -- import, in one transaction per run (lab.store.equiv_fill): NULL until then
    -- skipped: filled, but some step was past the equiv limits (lab/scoring/equiv_rules.yaml);
    -- needs_replay: some step has a relative `cd` and no replay screen gave its working directory:
    -- either way the run's equiv mean is left NULL rather than taken over some of its steps
    equiv_state                 VARCHAR NOT NULL DEFAULT 'pending'  -- pending | done | skipped | needs_replay | failed
);

-- One row per run x step. (run_id, step_key) is stable: other modules key annotations on it.
CREATE TABLE steps (
    run_id                  VARCHAR NOT NULL,
    ord                     INTEGER NOT NULL,          -- position in the file's per_step list
    task_id                 VARCHAR NOT NULL,
    step_idx                INTEGER NOT NULL,
    step_key                VARCHAR NOT NULL,          -- "task-000/3"
    sample_idx              INTEGER,
    source_group            VARCHAR,
    bucket                  VARCHAR,
    valid_json              BOOLEAN,
    has_analysis            BOOLEAN,
    has_plan                BOOLEAN,
    ref_task_complete       BOOLEAN,
    pred_task_complete      BOOLEAN,
    pred_task_complete_true BOOLEAN,
    first_cmd_exact         DOUBLE,
    command_precision       DOUBLE,
    command_recall          DOUBLE,
    command_f1              DOUBLE,
    n_ref_units             INTEGER,
    n_pred_units            INTEGER,
    ref_command_units       VARCHAR[],
    pred_command_units      VARCHAR[],
    pred_preview            VARCHAR,
    raw_output              VARCHAR,
    finish_reason           VARCHAR,
    stop_reason             VARCHAR,
    template_status         VARCHAR,
    prompt_tokens           INTEGER,
    completion_tokens       INTEGER,
    latency_s               DOUBLE,
    ttft_s                  DOUBLE,
    parse_failure           VARCHAR,
    units_from_fallback     BOOLEAN,
    error                   VARCHAR,
    -- token log-probabilities of the answer (per_step[].logprobs, lab.engines.logprobs); NULL: not recorded
    lp_mean                 DOUBLE,                    -- mean over the generated tokens
    lp_min                  DOUBLE,                    -- the least likely generated token
    lp_low_tokens           INTEGER,                   -- tokens below assets/logprobs.yaml low_confidence
    extra_json              VARCHAR,                   -- any other per-step keys
    -- equiv_f1 (not the published score): F1 after the rules of lab/scoring/equiv_rules.yaml;
    -- NULL while the run's equiv_state is 'pending'
    equiv_precision         DOUBLE,
    equiv_recall            DOUBLE,
    equiv_f1                DOUBLE,
    equiv_cwd               VARCHAR,                   -- working directory `cd` was resolved against (NULL: unknown)
    equiv_skipped           VARCHAR,                   -- why equiv_* is NULL: 'equiv skipped: too large (…)' | 'equiv needs the replay'
    PRIMARY KEY (run_id, step_key)
);

-- One row per run x step x sampled answer (result files written with `replay --samples N`; the
-- step's own row in `steps` is sample 0). Columns as in the per-step `samples` entries.
CREATE TABLE samples (
    run_id              VARCHAR NOT NULL,
    step_key            VARCHAR NOT NULL,
    sample              INTEGER NOT NULL,          -- 0 … N-1
    seed                BIGINT,
    raw_output          VARCHAR,
    pred_command_units  VARCHAR[],
    n_pred_units        INTEGER,
    valid_json          BOOLEAN,
    pred_task_complete  BOOLEAN,
    first_cmd_exact     DOUBLE,
    command_precision   DOUBLE,
    command_recall      DOUBLE,
    command_f1          DOUBLE,
    finish_reason       VARCHAR,
    completion_tokens   INTEGER,
    latency_s           DOUBLE,
    parse_failure       VARCHAR,
    error               VARCHAR,
    PRIMARY KEY (run_id, step_key, sample)
);

-- One row per run x step that has samples: its figures over them (lab.scoring.stability).
CREATE TABLE sample_stats (
    run_id          VARCHAR NOT NULL,
    step_key        VARCHAR NOT NULL,
    n_samples       INTEGER NOT NULL,
    f1_mean         DOUBLE,
    f1_std          DOUBLE,                        -- population std of the samples' F1
    f1_min          DOUBLE,
    f1_max          DOUBLE,
    f1_spread       DOUBLE,                        -- max - min
    n_pass          INTEGER,                       -- samples with F1 >= pass_threshold
    pass_threshold  DOUBLE,
    n_distinct      INTEGER,                       -- distinct answers (command-unit lists)
    PRIMARY KEY (run_id, step_key)
);

-- What a run limited on purpose says after its name (runs.selected_steps): "limited to 2 steps".
CREATE OR REPLACE MACRO limited_to(n) AS 'limited to ' || n || CASE WHEN n = 1 THEN ' step' ELSE ' steps' END;

-- Published rows and imported runs in one shape, for the plots. Legacy runs carry their
-- scoring_version: plot queries keep to corrected_303.
CREATE VIEW results_all AS
SELECT 'published' AS source, CAST(NULL AS VARCHAR) AS run_id, model_label AS name, model_id,
       family, params_b, active_params_b, training, training_method, epochs, checkpoint_step,
       score, score_marked, avg_command_f1, precision, recall, first_cmd_exact_pct, valid_json_pct,
       sec_per_step, load_s, template_status, rank_eligible, in_first_56, rank,
       'corrected_303' AS scoring_version,
       CAST(NULL AS DOUBLE) AS equiv_score, CAST(NULL AS DOUBLE) AS spelling_gap,
       rank_latest, steps, 303 AS total_steps, round(coalesce(steps, 303) / 303, 4) AS coverage,
       coalesce(steps, 303) < 303 AS partial, CAST(NULL AS VARCHAR) AS equiv_state
FROM leaderboard
UNION ALL
SELECT 'run', run_id,
       CASE WHEN checkpoint_step IS NOT NULL AND display_name NOT LIKE '%checkpoint-%'
            THEN display_name || ' (checkpoint-' || checkpoint_step || ')' ELSE display_name END
       || CASE WHEN partial THEN ' [partial ' || steps || '/' || coalesce(total_steps, steps)
                    || CASE WHEN num_shards > 1 THEN ', shard ' || (shard_index + 1) || ' of ' || num_shards ELSE '' END
                    || CASE WHEN selected_steps IS NOT NULL THEN ', ' || limited_to(selected_steps) ELSE '' END
                    || ']'
               -- complete for the selection it was limited to on purpose
               WHEN selected_steps IS NOT NULL THEN ' [' || limited_to(selected_steps) || ']'
               -- whole on its replay, but that replay is not the full step set: not a score of the full set
               WHEN total_steps < CASE WHEN scoring_version = 'legacy_386' THEN 386 ELSE 303 END
                    THEN ' [' || total_steps || '-step replay]'
               ELSE '' END,
       model_id,
       family, params_b, active_params_b, training, training_method, epochs, checkpoint_step,
       score, FALSE, avg_command_f1, avg_command_precision, avg_command_recall, first_cmd_exact_pct,
       valid_json_pct, avg_sec_per_step, load_time_sec, template_status, rank_eligible, FALSE, NULL,
       scoring_version, equiv_score, spelling_gap,
       NULL, steps, total_steps, coverage, partial, equiv_state
FROM runs;

-- Reference-likelihood runs (`python -m lab score-reference`, lab.runs.reference_run): one row per file.
CREATE TABLE reference_runs (
    ref_run_id          VARCHAR PRIMARY KEY,       -- short sha1 of the file's bytes
    path                VARCHAR NOT NULL UNIQUE,   -- relative to results/ when inside it
    file_size           BIGINT,
    file_mtime          DOUBLE,
    engine_spec         VARCHAR,
    model_path          VARCHAR,                   -- joins runs.model_path (with lora_path) of the same model
    lora_path           VARCHAR,
    model_short         VARCHAR,
    contract            VARCHAR,
    replay_sha256       VARCHAR,
    steps               INTEGER,
    steps_scored        INTEGER,
    ref_tokens          BIGINT,
    ref_nll_per_token   DOUBLE,                    -- total NLL / total reference tokens
    timestamp           VARCHAR,
    imported_at         TIMESTAMP
);

-- One row per reference-likelihood run x step.
CREATE TABLE reference_steps (
    ref_run_id          VARCHAR NOT NULL,
    task_id             VARCHAR NOT NULL,
    step_idx            INTEGER NOT NULL,
    step_key            VARCHAR NOT NULL,
    ref_tokens          INTEGER,
    ref_logprob         DOUBLE,                    -- sum over the reference's tokens (teacher forcing)
    ref_logprob_mean    DOUBLE,
    ref_nll_per_token   DOUBLE,
    prompt_tokens       INTEGER,
    error               VARCHAR,
    PRIMARY KEY (ref_run_id, step_key)
);

-- Each run's steps with the reference likelihood of the same model (model_path and lora_path), from the
-- newest reference-likelihood run of that model that scored the step.
CREATE VIEW step_reference AS
SELECT s.run_id, s.step_key, rs.ref_run_id, rs.ref_tokens, rs.ref_logprob, rs.ref_logprob_mean, rs.ref_nll_per_token
FROM steps s
JOIN runs r USING (run_id)
JOIN reference_runs rr ON rr.model_path = r.model_path AND coalesce(rr.lora_path, '') = coalesce(r.lora_path, '')
JOIN reference_steps rs ON rs.ref_run_id = rr.ref_run_id AND rs.step_key = s.step_key
WHERE rs.ref_logprob IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY s.run_id, s.step_key ORDER BY rr.imported_at DESC, rr.ref_run_id) = 1;

CREATE TABLE schema_version (
    version    INTEGER NOT NULL,
    created_at TIMESTAMP NOT NULL
);
