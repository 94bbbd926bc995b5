-- Published runs (lab/published/fetch.py): the catalogue run each imported file came from, its
-- series position, and the leaderboard row it reproduces. Derived from runs.path and the
-- shipped catalogue, so it is refilled after a rebuild.
CREATE TABLE IF NOT EXISTS published_runs (
    run_id          VARCHAR PRIMARY KEY,
    run_key         VARCHAR NOT NULL,      -- catalogue run ("<folder>/<name>")
    paths           VARCHAR[],             -- repository paths it was made from
    commit_sha      VARCHAR,
    kind            VARCHAR,               -- full | smoke | sample (as listed)
    pieces          INTEGER,               -- files merged into it (1 for a whole file)
    series          VARCHAR,
    x_kind          VARCHAR,               -- checkpoint step | epoch
    x               INTEGER,
    leaderboard_row INTEGER                -- leaderboard.row_no it matches, NULL when none
);
