"""Runs: the pipeline (render, generate, parse, score), checkpointed batch replay with exact resume, samples,
the reference likelihood and rescoring."""
