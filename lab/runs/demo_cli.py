"""`python -m lab demo`: a synthetic pair a newcomer can compare with intervals offline (lab.runs.demo). Writes
a synthetic replay shaped like TB2-lite and two runs on it with a known difference under
`<results>/synthetic/`, imports them into the store (Results, Triage, the series and Compare show them,
named synthetic-demo-…), and prints the commands that compare them."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Callable

from lab.errors import LabError
from lab.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.runs.demo_replay import demo_settings

    s = demo_settings()
    parser.add_argument("--difference", type=float, default=None, metavar="POINTS",
                        help=f"the candidate's true lead in score points, -{s.max_difference:g} to "
                             f"{s.max_difference:g} (default {s.difference:g})")
    parser.add_argument("--seed", type=int, default=None, help=f"seed of the synthetic tasks and answers (default {s.seed})")
    parser.add_argument("--results", default=None,
                        help=f"results folder whose store gets the pair (default: results/; files in <results>/{s.folder}/)")


def _check(args: argparse.Namespace) -> None:
    if args.difference is not None and not math.isfinite(args.difference):
        raise LabError(f"--difference {args.difference}: give a finite number of points")
    if args.seed is not None and not 0 <= args.seed <= 2**32 - 1:
        raise LabError(f"--seed {args.seed}: give a whole number from 0 to {2**32 - 1}")


def run(args: argparse.Namespace, *, import_run: Callable[[Settings, Path], str] | None = None) -> int:
    """Build the pair, import it (`import_run`, passed in by lab.cli: the store sits above the runs) and say
    how to compare it."""
    from lab.resultfiles.files import read_result_file
    from lab.runs.demo import build_demo
    from lab.runs.demo_replay import demo_settings

    _check(args)
    settings = Settings(results_dir=Path(args.results)) if args.results else Settings()
    pair = build_demo(settings.results_dir, args.difference, args.seed)
    s = demo_settings()
    print(f"SYNTHETIC demonstration (not TB2-lite, not a model): {pair.steps} steps of {pair.tasks} synthetic tasks "
          f"shaped like TB2-lite, and two runs whose true difference is {pair.difference:+.2f} points by "
          f"construction (the candidate answers a step exactly with a chance {pair.chance_gap:+.3f} different "
          "on every task).")
    print(f"  replay:    {pair.replay} (sha256 {pair.replay_sha256[:12]}…)")
    for role, path in (("baseline", pair.baseline), ("candidate", pair.candidate)):
        score = 100 * read_result_file(path)["aggregate"]["avg_command_f1"]
        line = f"  {role + ':':<10} {path}  score {score:.2f}"
        print(line + (f"  ({import_run(settings, path)})" if import_run is not None else ""))
    print("Compare them (the interval should hold the true difference about 95 % of the time):\n"
          f"  python -m lab compare {s.baseline} {s.candidate}\n"
          f"  python -m lab compare {s.baseline} {s.candidate} --max-drop 0   # as a CI gate\n"
          "In the app (its steps, prompts and answers shown from the synthetic replay):\n"
          f"  python app.py --replay {pair.replay}\n"
          f"  Results: pick {s.baseline} as the baseline · Triage: baseline {s.baseline}, candidate {s.candidate} · "
          "Compare: add both as stored runs")
    return 0
