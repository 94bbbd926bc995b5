"""The replay steps every checkpoint of a training run is evaluated on, chosen as `python -m lab replay` chooses them."""
from __future__ import annotations

from lab.data.replay import ReplaySet
from lab.data.step import Step
from lab.runs.options import RunOptions, select_steps
from lab.settings import Settings
from lab.training.options import EvalOptions


def run_options(options: EvalOptions) -> RunOptions:
    """The run options of every checkpoint's replay: its replay source and how its steps are chosen (the engine's
    SPEC carries the sampling: EvalOptions.spec_options)."""
    return RunOptions(replay=options.replay, mode=options.mode, tasks=tuple(options.tasks) if options.tasks else None,
                      limit=options.limit)


def training_steps(options: EvalOptions, settings: Settings) -> tuple[ReplaySet, list[Step], dict]:
    """(the replay source, its steps chosen by mode, tasks and limit, the selection as result files record it);
    a replay that is missing or malformed, or a selection left empty, is one LabError."""
    run = run_options(options)
    replay_set, steps = select_steps(run, settings)
    return replay_set, steps, run.selection
