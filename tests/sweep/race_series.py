"""A synthetic checkpoint series to race without a model: a replay of many tasks cloned from the excerpt
(new task ids, several source groups) and `stored:` result files whose answers score what each checkpoint
should (the reference's own units: F1 1; none: F1 0), scored by the lab's scorer as a harness run is."""
from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path

from lab.data import load_replay
from lab.data.conversations import step_record
from lab.engines.registry import create_engine
from lab.resultfiles.files import write_result_file
from lab.runs.pipeline import run_steps
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.metrics import score_units
from tests.paths import EXCERPT

GROUPS = ("code", "debugging", "security", "system_administration")


def write_replay(path: Path, tasks: int) -> Path:
    """`tasks` tasks, each a copy of one of the excerpt's two (7 steps), groups cycling over GROUPS."""
    base = load_replay(str(EXCERPT)).steps
    sources = [base[0].task_id, base[-1].task_id]
    records = []
    for n in range(tasks):
        group = GROUPS[n % len(GROUPS)]
        for step in (s for s in base if s.task_id == sources[n % 2]):
            clone = dataclasses.replace(step, task_id=f"task-{n:03d}", sample_idx=n, source_group=group,
                                        source=f"synthetic/{group}")
            records.append(step_record(clone))
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def write_checkpoint(path: Path, replay: Path, right: float, name: str | None = None) -> Path:
    """A stored run of every step of `replay`: on about a share `right` of the steps (a different share in
    each task; a checkpoint with a higher share is right wherever a lower one is) the reference's own units,
    on the others none."""
    steps = load_replay(str(replay)).steps
    engine = create_engine("reference")
    engine.load()
    rows = []
    for result in run_steps(engine, steps):
        row = dict(result.per_step)
        keep = zlib.crc32(f"{row['task_id']}/{row['step_idx']}".encode()) % 100 < 100 * right
        pred = list(row["ref_command_units"]) if keep else []
        row["pred_command_units"] = pred
        row.update(score_units(pred, row["ref_command_units"]).to_dict())
        row["raw_output"] = row["pred_preview"] = json.dumps(
            {"analysis": "stored", "plan": "", "commands": [{"keystrokes": u + "\n", "duration": 0.1} for u in pred]})
        rows.append(row)
    name = name or path.stem
    write_result_file(path, {"model": name, "model_short": name, "model_path": name, "gpu": "none",
                             "eval_path": str(replay), "timestamp": "2026-01-01T00:00:00",
                             "scoring_version": "corrected_303", "aggregate": aggregate_scores(rows), "per_step": rows})
    return path
