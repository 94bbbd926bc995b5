"""The replay steps every checkpoint of a training run is evaluated on, chosen as `python -m lab replay` chooses them."""
from __future__ import annotations

import argparse

from lab.data.replay import ReplaySet
from lab.data.step import Step
from lab.runs.options import select_steps, step_selection
from lab.settings import Settings
from lab.training.options import EvalOptions


def training_steps(options: EvalOptions, settings: Settings) -> tuple[ReplaySet, list[Step], dict]:
    """(the replay source, its steps chosen by mode, tasks and limit, the selection as result files record it);
    a replay that is missing or malformed, or a selection left empty, is one LabError."""
    args = argparse.Namespace(replay=options.replay, mode=options.mode, lenient=False, tasks=options.tasks,
                              limit=options.limit)
    replay_set, steps = select_steps(args, settings)
    return replay_set, steps, step_selection(options.mode, options.tasks, options.limit)
