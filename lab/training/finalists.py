"""The series judgement after a training run evaluated on a subset: which checkpoints cannot be ruled out as the
best, and so get the whole replay.

Every checkpoint evaluated on the subset is scored on the same steps (the subset's tasks), so they are
judged together: all pairs of checkpoints with simultaneous 95 % intervals over one set of task resamples
(lab.scoring.paired.rank_ties: max-T, so that looking at every pair cannot manufacture a difference). A
checkpoint is ruled out when some other checkpoint is better than it with that confidence; the others (its
best rank is 1) are the finalists. With too few steps or tasks for an interval (paired.yaml), none is ruled
out. Each checkpoint's chance of being the best on the subset (lab.scoring.best) comes with it, from the
same resamples.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lab.resultfiles.files import read_result_file
from lab.scoring.best import chances_of_runs
from lab.scoring.paired import load_settings
from lab.scoring.ranking import rank_ties


@dataclass
class Judgement:
    """Per checkpoint (by global step): its subset score, rank range, P(best), and whether it is a finalist."""

    steps: list[int]
    scores: list[float]
    rank_best: list[int]
    p_best: list[float | None]
    finalists: list[int]
    common_steps: int
    tasks: int
    note: str = ""
    adjustment: str = ""
    resamples: int = 0
    judged: list[int] = field(default_factory=list)  # the checkpoints judged (their steps), in order

    def to_dict(self) -> dict:
        return asdict(self)


def _per_step(path: Path) -> dict[str, tuple[str, float]]:
    """step key -> (task id, command F1: the mean of a step's sampled answers) of a result file."""
    rows: dict[str, list] = {}
    for row in read_result_file(path)["per_step"]:
        key = f"{row['task_id']}/{row['step_idx']}"
        rows.setdefault(key, [row["task_id"], []])[1].append(float(row.get("command_f1") or 0.0))
    return {k: (task, sum(v) / len(v)) for k, (task, v) in rows.items()}


def judge(results: dict[int, Path], seed: int | None = None) -> Judgement:
    """The judgement of the checkpoints whose subset result files are `results` (global step -> file)."""
    steps = sorted(results)
    settings = load_settings()
    if len(steps) < 2:
        return Judgement(steps, [], [1] * len(steps), [1.0] * len(steps), steps, 0, 0,
                         note="one checkpoint evaluated: it is the only finalist", judged=steps)
    tables = [_per_step(results[s]) for s in steps]
    keys = sorted(set.intersection(*(set(t) for t in tables)))
    tasks = sorted({tables[0][k][0] for k in keys})
    index = {t: i for i, t in enumerate(tasks)}
    task = np.array([index[tables[0][k][0]] for k in keys], dtype=np.int64)
    values = np.array([[t[k][1] for t in tables] for k in keys], dtype=float).reshape(len(keys), len(steps))
    scores = [round(float(100 * values[:, j].mean()), 2) if len(keys) else float("nan") for j in range(len(steps))]
    ranking = rank_ties(task, values, len(tasks), seed=seed) if len(keys) else None
    if ranking is None:
        return Judgement(steps, scores, [1] * len(steps), [None] * len(steps), steps, len(keys), len(tasks),
                         note=(f"{len(keys)} common steps of {len(tasks)} tasks: too few for an interval "
                               f"(at least {settings.min_common_steps} steps of {settings.min_common_tasks} tasks); "
                               "no checkpoint is ruled out"), judged=steps)
    resamples = settings.resamples
    chances = chances_of_runs(task, values, resamples=resamples, seed=seed)
    finalists = [s for s, best in zip(steps, ranking.rank_best) if int(best) == 1]
    return Judgement(steps, scores, [int(r) for r in ranking.rank_best], [round(float(p), 4) for p in chances.p_best],
                     finalists, len(keys), len(tasks), adjustment=ranking.adjustment, resamples=resamples,
                     judged=steps)


def judgement_line(judgement: Judgement) -> str:
    """One line: how many checkpoints were judged on the subset and which get the whole replay."""
    kept = ", ".join(f"checkpoint-{s}" for s in judgement.finalists)
    if judgement.note:
        return f"series judgement on the subset: {judgement.note}; whole replay for {kept}"
    ruled = len(judgement.steps) - len(judgement.finalists)
    return (f"series judgement on the subset ({judgement.common_steps} steps of {judgement.tasks} tasks, 95 %, "
            f"{judgement.adjustment}): {ruled} of {len(judgement.steps)} checkpoints ruled out as the best; "
            f"whole replay for {kept}")
