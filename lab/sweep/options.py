"""Per-engine replay options of a sweep, shipped to workers as plain data."""
from __future__ import annotations

import argparse

from lab.engines.base import Sampling

SAMPLING_ARGS = ("max_tokens", "temperature", "top_p", "seed")
# what a sweep runs on each engine: its answers (a replay), or its likelihood of the reference answers
ANSWERS, REFERENCE = "answers", "reference"
WHAT = (ANSWERS, REFERENCE)


def sampling_for(engine, options: dict) -> Sampling:
    """The engine's default sampling with the sweep's overrides (as `replay` does)."""
    from lab.runs.replay_cli import _sampling

    return _sampling(engine, argparse.Namespace(**options["sampling"]))


def worker_options(args: argparse.Namespace, run_name: str | None, extra: dict, fingerprint: str, source: str,
                   what: str = ANSWERS, replay_steps: int | None = None) -> dict:
    """What a worker needs to build the ReplayConfig that `replay` would build (or the ReferenceConfig of
    `score-reference` when `what` is REFERENCE)."""
    from lab.runs.options import step_selection

    config = {
        "eval_path": source, "scorer": args.scorer, "chunk_size": args.chunk_size,
        "allow_raw_fallback": args.allow_raw_fallback, "max_model_len": args.max_model_len,
        "run_name": run_name, "replay_fingerprint": fingerprint, "extra": extra,
        "selection": step_selection(args.mode, args.tasks, args.limit), "samples": args.samples,
    }
    if replay_steps:
        config["replay_steps"] = replay_steps
    if args.pass_threshold is not None:
        config["pass_threshold"] = args.pass_threshold
    return {"config": config, "sampling": {k: getattr(args, k, None) for k in SAMPLING_ARGS}, "what": what}


def default_options(**overrides) -> argparse.Namespace:
    """The per-engine options `python -m lab sweep` parses, at their defaults, with `overrides` (what the
    Batch tab chooses: samples, resume …); an override the CLI does not have is a programming error."""
    from lab.runs.replay_cli import add_arguments

    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    args = parser.parse_args(["--engine", "reference"])
    unknown = set(overrides) - set(vars(args))
    if unknown:
        raise TypeError(f"not a sweep option: {', '.join(sorted(unknown))}")
    vars(args).update(overrides, engine=[])
    return args
