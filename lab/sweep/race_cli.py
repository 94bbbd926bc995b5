"""`python -m lab sweep --race`: race a checkpoint series on Ray, the race table printed after every round."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.errors import LabError

# the replay options a checkpoint's header pins: `replay --resume` must be given the same ones
RESUME_FLAGS = (("--mode", "mode"), ("--scorer", "scorer"), ("--tasks", "tasks"), ("--limit", "limit"),
                ("--max-tokens", "max_tokens"), ("--temperature", "temperature"), ("--top-p", "top_p"),
                ("--seed", "seed"), ("--samples", "samples"), ("--max-model-len", "max_model_len"),
                ("--allow-raw-fallback", "allow_raw_fallback"))


def add_race_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.runs.replay_cli import _number

    parser.add_argument("--race", action="store_true",
                        help="race the checkpoints: replay their steps in rounds of whole tasks (shuffled with --seed, "
                             "balanced over source groups) and stop replaying each one that is worse than the leader "
                             "with 95 %% confidence; writes race.json in --out")
    parser.add_argument("--round-tasks", type=_number(int, 1), default=None, metavar="N",
                        help="with --race: tasks per round (default: lab/scoring/race.yaml's, 5)")
    parser.add_argument("--budget-steps", type=_number(int, 1), default=None, metavar="N",
                        help="with --race: end the race before a round would take its steps (all checkpoints "
                             "together) past N")


def check_race_args(args: argparse.Namespace) -> None:
    """The race's options without --race, or with options a race cannot take, are one-line errors."""
    if not args.race:
        given = [flag for flag, value in (("--round-tasks", args.round_tasks), ("--budget-steps", args.budget_steps))
                 if value is not None]
        if given:
            raise LabError(f"{' and '.join(given)} belong to a race: add --race")
        return
    from lab.sweep.options import ANSWERS

    if args.what != ANSWERS:
        raise LabError("--race judges the checkpoints' answers: drop --what reference")


def resume_flags(args: argparse.Namespace) -> dict:
    """The flags that complete a raced checkpoint with `replay --resume` as the race replayed it."""
    return {flag: getattr(args, key) for flag, key in RESUME_FLAGS}


def run_race(args: argparse.Namespace, sweep, out_dir: Path, import_run=None) -> int:
    """Race `sweep` (its specs, steps and options as the sweep parsed them); 0 once it ended on its own.
    A checkpoint that got every step has its result file, which `import_run(path)` takes into the store."""
    from lab.scoring.sequential import load_race_settings
    from lab.sweep.bars import TerminalBars
    from lab.sweep.race import Race, execute_race
    from lab.sweep.race_book import FAILED, STOPPED
    from lab.sweep.race_table import race_table, resume_command, round_line
    from tqdm import tqdm

    race = Race(sweep, args.round_tasks or load_race_settings().round_tasks,
                args.seed if args.seed is not None else 0, args.budget_steps)
    bars = TerminalBars()

    def connected(cluster) -> None:
        print(f"Ray cluster {cluster.address} · {cluster.nodes} node(s) · dashboard: {cluster.dashboard or 'off'}",
              file=sys.stderr)

    def on_round(book, record) -> None:
        tqdm.write(f"{round_line(book, record)}\n{race_table(book.standings())}\n", file=sys.stdout)

    try:
        outcome = execute_race(race, args.ray, args.resume, progress=bars, connected=connected, on_round=on_round)
    finally:
        bars.close()
    book = outcome.book
    print(f"race ended: {book.ended} after {len(book.rounds)} of {book.plan.rounds} rounds")
    print(race_table(book.standings()))
    flags = resume_flags(args)
    for job, standing in zip(outcome.jobs, book.standings()):
        if job.error:
            print(f"error: {job.error}", file=sys.stderr)
        elif job.path is not None:
            print(f"{standing.name}: every step replayed -> {job.path}")
            if import_run is not None:
                print(import_run(job.path))
        elif job.run is not None and job.rows:
            print(f"{standing.name}: {len(job.rows)} steps in {job.run.path}; complete it with: "
                  + resume_command(job.spec, standing.name, sweep.source.path, str(out_dir), flags))
    print(f"race -> {outcome.path}")
    return 1 if book.ended in (STOPPED, FAILED) or any(job.error for job in outcome.jobs) else 0
