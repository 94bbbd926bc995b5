"""`python -m lab sweep`: replay many engines (a checkpoint series, shards of one engine) on a Ray cluster."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.errors import LabError
from lab.settings import env, Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.runs.replay_cli import _number, add_arguments as replay_arguments
    from lab.sweep.options import ANSWERS, WHAT
    from lab.sweep.race_cli import add_race_arguments

    replay_arguments(parser)
    parser.add_argument("--ray", default=None, metavar="ADDRESS",
                        help="Ray cluster address (ray://HEAD:10001 or HEAD:6379), or `local` to start one here; "
                             "default: $LAB_RAY_ADDRESS, else local")
    parser.add_argument("--shards", type=_number(int, 1), default=1, metavar="N",
                        help="split each engine's steps into N shards run in parallel, then merge them")
    parser.add_argument("--what", choices=list(WHAT), default=ANSWERS,
                        help="answers: each engine replays the steps (as `replay`); reference: each engine scores the "
                             "reference answers' likelihood (as `score-reference`: NAME.reference.json, no sampling)")
    add_race_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from lab.engines.preset_fit import spec_fit_warnings
    from lab.runs.options import ReplaySource, replay_settings, select_steps
    from lab.runs.replay_cli import run_options
    from lab.runs.samples_cli import check_sample_args
    from lab.sweep.bars import TerminalBars
    from lab.sweep.options import REFERENCE
    from lab.sweep.plan import Sweep, execute
    from lab.sweep.race_cli import check_race_args
    from lab.sweep.specs import expand_specs

    options = run_options(args)
    check_sample_args(options)
    check_race_args(args)
    if args.what == REFERENCE and options.samples > 1:
        raise LabError(f"--samples {options.samples} with --what reference: the reference is scored once per step "
                       "(teacher forcing, no sampling); drop --samples")
    settings = replay_settings(options.replay)
    specs = expand_specs(args.engine)
    for line in spec_fit_warnings(specs):  # built here as on the workers, where the checkpoints are the same paths
        print(f"warning: {line}", file=sys.stderr)
    replay_set, steps = select_steps(options, settings)
    out_dir = Path(options.out) if options.out else settings.runs_dir
    run_name = options.name if len(specs) == 1 else None
    sweep = Sweep(specs, steps, options, ReplaySource.of(replay_set), out_dir, args.shards, [run_name] * len(specs),
                  args.what)
    if args.race:
        from lab.sweep.race_cli import run_race

        return run_race(args, sweep, out_dir, _importer(out_dir, settings))
    audit = env("LAB_SWEEP_AUDIT")  # a file: every path each worker process opened, as JSON
    bars = TerminalBars()

    def connected(cluster) -> None:
        print(f"Ray cluster {cluster.address} · {cluster.nodes} node(s) · dashboard: {cluster.dashboard or 'off'}",
              file=sys.stderr)

    try:
        jobs, outcomes = execute(sweep, args.ray, options.resume, progress=bars, audit=bool(audit), connected=connected)
    finally:
        bars.close()
    if audit:
        Path(audit).write_text(json.dumps({j.spec + (f"#{j.shard[0]}" if j.shard else ""): j.events for j in jobs}))
    failures = 0
    for outcome in outcomes:
        if outcome.error or outcome.stopped:
            failures += 1
            print(f"error: {outcome.error or outcome.spec + ': stopped'}", file=sys.stderr)
            continue
        agg = outcome.aggregate
        lacking = (f" ({outcome.missing} of the {len(steps)} selected are not in its stored run)"
                   if outcome.missing else "")
        if args.what == REFERENCE:
            nll = agg["ref_nll_per_token"]
            print(f"{outcome.spec}: {agg['steps_scored']} of {agg['steps']} steps scored, {agg['ref_tokens']} reference "
                  f"tokens, NLL per token {'n/a' if nll is None else f'{nll:.4f}'} -> {outcome.path}")
        else:
            print(f"{outcome.spec}: {agg['steps']} steps{lacking}, score {100 * agg['avg_command_f1']:.2f} -> {outcome.path}")
        importer = _importer(out_dir, settings)
        if importer is not None:
            print(importer(outcome.path))
    return 1 if failures else 0


def _importer(out_dir: Path, settings: Settings):
    """In the lab's own runs folder the driver imports each finished run into the store (None elsewhere)."""
    if out_dir.resolve() != Path(settings.runs_dir).resolve():
        return None
    from lab.store.autoimport import import_new_run

    return lambda path: import_new_run(settings, path)
