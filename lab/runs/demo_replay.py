"""The demonstration's replay: synthetic tasks shaped like TB2-lite (50 tasks, 303 steps, uneven task lengths,
source groups, 1-4 reference commands a step), written in the replay's per-turn format so the lab reads it as
it reads the real one. Every task id, prompt and source says "synthetic": none of it is a TB2-lite task."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from lab.errors import LabError

DEMO_PATH = Path(__file__).with_name("demo.yaml")
SOURCE = "synthetic/demo (not a TB2-lite task)"


@dataclass(frozen=True)
class DemoSettings:
    """demo.yaml."""

    folder: str
    replay_file: str
    baseline: str
    candidate: str
    tasks: int
    steps: int
    spread: float
    commands_per_step: tuple[int, int]
    baseline_right: tuple[float, float]
    same_draw: float
    difference: float
    max_difference: float
    seed: int
    source_groups: tuple[str, ...]
    commands: tuple[str, ...]
    miss_command: str


@lru_cache(maxsize=1)
def demo_settings(path: Path = DEMO_PATH) -> DemoSettings:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    low, high = raw["commands_per_step"]
    right = raw["baseline_right"]
    return DemoSettings(str(raw["folder"]), str(raw["replay_file"]), str(raw["names"]["baseline"]),
                        str(raw["names"]["candidate"]), int(raw["tasks"]), int(raw["steps"]),
                        float(raw["task_length_spread"]), (int(low), int(high)), (float(right[0]), float(right[1])),
                        float(raw["same_draw"]), float(raw["difference"]), float(raw["max_difference"]),
                        int(raw["seed"]), tuple(raw["source_groups"]), tuple(raw["commands"]),
                        str(raw["miss_command"]))


def task_lengths(rng: np.random.Generator, tasks: int, steps: int, spread: float) -> list[int]:
    """Steps per task: at least one each, the rest spread unevenly (a Dirichlet-multinomial), `steps` in all."""
    if steps < tasks:
        raise LabError(f"a demo replay of {steps} steps cannot hold {tasks} tasks")
    shares = rng.dirichlet(np.full(tasks, spread))
    return [1 + int(n) for n in rng.multinomial(steps - tasks, shares)]


def reply(commands: list[str], analysis: str, complete: bool) -> str:
    """An answer in the harness's JSON shape (SPEC §2) running `commands`."""
    return json.dumps({"analysis": analysis, "plan": "synthetic demonstration step",
                       "commands": [{"keystrokes": f"{c}\n", "duration": 0.1} for c in commands],
                       "task_complete": complete})


def demo_records(settings: DemoSettings, seed: int) -> list[dict]:
    """The replay's records, deterministic from `seed`."""
    rng = np.random.default_rng([seed, 0])
    out = []
    for n, length in enumerate(task_lengths(rng, settings.tasks, settings.steps, settings.spread)):
        task = f"synthetic-{n:03d}"
        group = settings.source_groups[n % len(settings.source_groups)]
        for k in range(length):
            count = int(rng.integers(settings.commands_per_step[0], settings.commands_per_step[1] + 1))
            picks = rng.choice(len(settings.commands), size=count, replace=False)
            commands = [settings.commands[int(i)].format(n=n, k=k) for i in picks]
            prompt = (f"Synthetic demonstration task {n} (not a TB2-lite task), step {k + 1} of {length}.\n"
                      f"New Terminal Output:\n\nroot@synthetic:/srv/synthetic-{n}# ")
            out.append({"task_id": task, "sample_idx": 0, "step_idx": k, "total_steps": length,
                        "is_final_step": k == length - 1, "source": SOURCE, "source_group": group,
                        "prompt": prompt, "ref_raw": reply(commands, f"synthetic reference of {task} step {k}",
                                                           k == length - 1)})
    return out


def write_replay(path: Path, records: list[dict]) -> Path:
    """The records as a replay .jsonl file (one JSON object a line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path
