"""Result files with steps of thousands of distinct command units a side (issue 26 item 4): the
shape that made the equiv fill unbounded. Huge steps use disjoint tokens on the two sides, so the
harness metrics (all 0) are right by construction; the others are scored by the harness itself."""
from __future__ import annotations

from lab.scoring import aggregate_scores, score_batch


def _row(task: int, step: int, ref: list[str], pred: list[str]) -> dict:
    return {"task_id": f"task-{task:03d}", "step_idx": step, "source_group": "software_engineering",
            "bucket": "mid", "valid_json": True, "has_analysis": True, "has_plan": True,
            "ref_task_complete": False, "pred_task_complete": False, "pred_task_complete_true": False,
            "ref_command_units": ref, "pred_command_units": pred}


def huge_result(huge_steps: int = 7, huge_units: int = 3000, normal_steps: int = 7, normal_units: int = 200,
                model: str = "huge-units") -> dict:
    """A result dict: `huge_steps` steps of `huge_units` distinct units a side, then `normal_steps`
    steps of `normal_units` units whose flags the equiv rules rewrite (`ls -al` for `ls -la`)."""
    rows = []
    for s in range(huge_steps):
        rows.append(_row(s // 8, s % 8, [f"echo r{s}x{i}" for i in range(huge_units)],
                         [f"printf p{s}y{i}" for i in range(huge_units)]))
    for k in range(normal_steps):
        s = huge_steps + k
        rows.append(_row(s // 8, s % 8, [f"ls -la /data/d{s}/f{i}" for i in range(normal_units)],
                         [f"ls -al /data/d{s}/f{i}" for i in range(normal_units)]))
    for row, metrics in zip(rows, score_batch([(r["pred_command_units"], r["ref_command_units"]) for r in rows])):
        row.update(metrics.to_dict())
    return {"model": model, "model_short": model, "per_step": rows, "aggregate": aggregate_scores(rows, "corrected")}
