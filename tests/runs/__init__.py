"""lab/runs: pipeline, replay, rescore, resume, samples."""
