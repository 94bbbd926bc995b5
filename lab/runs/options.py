"""How a run's steps are chosen: the lab's settings for its replay source, the steps its mode, tasks and limit
select, and the selection as its files record it. Shared by replay, score-reference, the sweep and the training
callback."""
from __future__ import annotations

import argparse
import sys

from lab.errors import LabError
from lab.settings import Settings


def step_selection(mode: str, tasks: list[str] | None, limit: int | None) -> dict:
    """How the steps of a run were chosen, as its checkpoint records it (resume must match)."""
    return {"mode": mode, "tasks": sorted(set(tasks)) if tasks else None, "limit": limit}


def replay_settings(args: argparse.Namespace) -> Settings:
    """The lab's settings for a command given `--replay PATH`: that replay is the one the store reads its
    steps' screens from when this command imports its run (equiv_f1 resolves `cd` targets with them), as
    LAB_REPLAY would make it; without --replay, LAB_REPLAY or the cached download as before."""
    return Settings(replay_path=args.replay) if getattr(args, "replay", None) else Settings()


def select_steps(args: argparse.Namespace, settings: Settings):
    """(the replay source, its steps chosen by --mode, --tasks and --limit); a skipped malformed line is a
    warning, no step left is one LabError. Shared by replay, score-reference and sweep."""
    from lab.data import load_replay

    replay_set = load_replay(args.replay, mode=args.mode, lenient=args.lenient, settings=settings)
    for problem in replay_set.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    steps = replay_set.steps
    if args.tasks:
        wanted = set(args.tasks)
        steps = [s for s in steps if s.task_id in wanted]
    if args.limit is not None:
        steps = steps[: args.limit]
    if not steps:
        raise LabError(f"{replay_set.path}: no steps selected (check --tasks / --limit / --mode)")
    return replay_set, steps
