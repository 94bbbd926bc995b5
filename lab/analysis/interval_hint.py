"""What would give a comparison its interval, said where none is shown: how many more common steps and tasks
it needs, the command that gets the full replay or the published per-step runs, and that more samples per
step cannot add tasks. Every surface that shows "fewer than 30 common steps … no interval" (the `compare`
command, Results, the checkpoint series, Triage, Compare) adds this line."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from lab.analysis.run_pairs import counted
from lab.scoring.paired import Difference, load_settings

HINT_PATH = Path(__file__).with_name("interval_hint.yaml")


@dataclass(frozen=True)
class HintSettings:
    full_steps: int
    full_tasks: int
    download: str
    published: str
    demo: str


@lru_cache(maxsize=1)
def load_hint_settings(path: Path = HINT_PATH) -> HintSettings:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return HintSettings(int(raw["full_replay"]["steps"]), int(raw["full_replay"]["tasks"]), str(raw["download"]),
                        str(raw["published"]), str(raw["demo"]))


def interval_hint(steps: int, tasks: int) -> str:
    """"" when `steps` common steps of `tasks` tasks are enough for an interval; else what to do, in one line."""
    need = load_settings()
    more_steps, more_tasks = max(0, need.min_common_steps - steps), max(0, need.min_common_tasks - tasks)
    if not more_steps and not more_tasks:
        return ""
    wanted = " and ".join(p for p in (more_steps and counted(more_steps, "more common step"),
                                      more_tasks and counted(more_tasks, "more task")) if p)
    h = load_hint_settings()
    return (f"to get an interval: {wanted} (at least {need.min_common_steps} steps of {need.min_common_tasks} "
            f"tasks; these runs share {counted(steps, 'step')} of {counted(tasks, 'task')}). Replay both runs on "
            f"the full replay ({h.full_steps} steps, {h.full_tasks} tasks: `{h.download}`) or compare published "
            f"per-step runs (`{h.published}`); more samples per step (--samples) add answers, not tasks. "
            f"A synthetic pair with intervals, offline: `{h.demo}`")


def hint_for(diff: Difference | None) -> str:
    """The hint for a difference shown without its interval for too few common steps or tasks ("" otherwise)."""
    if diff is None or diff.ci is not None:
        return ""
    return interval_hint(diff.steps, diff.tasks)
