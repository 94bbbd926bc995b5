-- Runs placed in a checkpoint series by hand (lab/store/series_members.py): any run, the base model
-- included, at a given position. A placement overrides the series a run's name or the published
-- catalogue gives it. Keyed by run id (the hash of the file's bytes), so it survives store rebuilds.
CREATE TABLE IF NOT EXISTS series_members (
    run_id      VARCHAR PRIMARY KEY,
    series      VARCHAR NOT NULL,
    x           BIGINT NOT NULL,         -- the position: checkpoint step (the base model: 0) or epoch
    x_kind      VARCHAR NOT NULL,        -- checkpoint step | epoch
    placed_at   TIMESTAMP NOT NULL
);
