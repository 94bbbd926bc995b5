"""`python -m lab sweep`: replay many engines (a checkpoint series, shards of one engine) on a Ray cluster."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lab.errors import LabError
from lab.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.runs.replay_cli import _number, add_arguments as replay_arguments

    replay_arguments(parser)
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="Ray cluster address (ray://HEAD:10001 or HEAD:6379), or `local` to start one here; "
                             "default: $LAB_RAY_ADDRESS, else local")
    parser.add_argument("--shards", type=_number(int, 1), default=1, metavar="N",
                        help="split each engine's steps into N shards run in parallel, then merge them")


def _select(args: argparse.Namespace, settings: Settings):
    from lab.data import load_replay

    replay_set = load_replay(args.replay, mode=args.mode, lenient=args.lenient, settings=settings)
    steps = replay_set.steps
    if args.tasks:
        steps = [s for s in steps if s.task_id in set(args.tasks)]
    if args.limit is not None:
        steps = steps[: args.limit]
    if not steps:
        raise LabError(f"{replay_set.path}: no steps selected (check --tasks / --limit / --mode)")
    return replay_set, steps


def connect(address: str | None):
    """Ray, connected to `address` (`local`/None starts a local instance)."""
    import ray

    address = address or os.environ.get("LAB_RAY_ADDRESS") or "local"
    kwargs = {"include_dashboard": False} if address == "local" else {"address": address}
    ray.init(ignore_reinit_error=True, log_to_driver=False, **kwargs)
    return ray


def run(args: argparse.Namespace) -> int:
    from lab.runs.samples_cli import check_sample_args
    from lab.sweep.driver import Job, run_jobs
    from lab.sweep.options import worker_options
    from lab.sweep.placement import check_fits, needs
    from lab.sweep.shards import merge, shard_fields, split
    from lab.sweep.specs import expand_specs
    from lab.scoring.stability import DEFAULT_PASS_THRESHOLD

    check_sample_args(args)
    settings = Settings()
    specs = expand_specs(args.engine)
    replay_set, steps = _select(args, settings)
    out_dir = Path(args.out) if args.out else settings.runs_dir
    run_name = args.name if len(specs) == 1 else None
    ray = connect(args.ray)
    try:
        nodes = ray.nodes()
        jobs: list[Job] = []
        for spec in specs:
            want = needs(spec)
            check_fits(spec, want, nodes)
            pieces = split(len(steps), args.shards) if args.shards > 1 else [range(len(steps))]
            for i, piece in enumerate(pieces):
                extra = shard_fields(i, len(pieces), len(steps)) if args.shards > 1 else {}
                options = worker_options(args, run_name, extra, replay_set.fingerprint, str(replay_set.path))
                resources = {k: v for k, v in want.items() if k in ("num_cpus", "num_gpus")}
                jobs.append(Job(spec, [steps[k] for k in piece], options, resources, run_name,
                                (i, len(pieces)) if args.shards > 1 else None))
        audit = os.environ.get("LAB_SWEEP_AUDIT")  # a file: every path each worker process opened, as JSON
        run_jobs(ray, jobs, out_dir, args.resume, audit=bool(audit))
        if audit:
            Path(audit).write_text(json.dumps({j.spec + (f"#{j.shard[0]}" if j.shard else ""): j.events for j in jobs}))
    finally:
        ray.shutdown()
    failures = 0
    for spec in specs:
        mine = [j for j in jobs if j.spec == spec]
        if any(j.error for j in mine):
            failures += 1
            print(f"error: {'; '.join(j.error for j in mine if j.error)}", file=sys.stderr)
            continue
        path = mine[0].path
        if args.shards > 1:
            merged = merge([j.result for j in mine], args.scorer, args.samples,
                           args.pass_threshold if args.pass_threshold is not None else DEFAULT_PASS_THRESHOLD,
                           [j.lengths for j in mine])
            path = out_dir / f"{mine[0].path.name.rsplit('-shard', 1)[0]}.json"
            from lab.resultfiles.resultfile import write_result_file

            write_result_file(path, merged)
            agg = merged["aggregate"]
        else:
            agg = mine[0].result["aggregate"]
        print(f"{spec}: {agg['steps']} steps, score {100 * agg['avg_command_f1']:.2f} -> {path}")
        if out_dir.resolve() == Path(settings.runs_dir).resolve():  # the lab's own runs folder: the driver imports
            from lab.store.autoimport import import_new_run

            print(import_new_run(settings, path))
    return 1 if failures else 0
