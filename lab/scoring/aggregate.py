"""Run-level aggregates of per-step rows (SPEC §7) and the task-complete rules (SPEC §6)."""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from lab.scoring.metrics import scorer_rules
from lab.tb2lite import CORRECTED


def task_complete_fields(pred_tc: bool | None, ref_tc: object, scorer: str = CORRECTED) -> dict:
    """Per-step task-complete fields: pred as parsed (bool or None), ref as bool, and the AND.

    Corrected: pred_task_complete_true = pred truthy AND ref truthy.
    Legacy: pred_task_complete_true = pred is exactly True, whatever the reference says.
    """
    rules = scorer_rules(scorer)
    ref = bool(ref_tc)
    hit = bool(pred_tc) and ref if rules.complete_true_needs_ref else pred_tc is True
    return {"ref_task_complete": ref, "pred_task_complete": pred_tc, "pred_task_complete_true": hit}


def _mean(values: list) -> float:
    return sum(values) / len(values)


def _pct(values: list) -> float:
    """Mean × 100, rounded to 1 decimal."""
    return round(_mean(values) * 100, 1)


def _share_pct(hits: int, count: int) -> float:
    return round(hits / max(count, 1) * 100, 1)


def _units_len(value: object) -> int:
    return len(value) if isinstance(value, (list, tuple)) else 0


def next_action_score(avg_command_f1: float, first_cmd_exact_pct: float) -> float:
    """The old weighted score, from the *rounded* aggregates, with Python float rounding."""
    return round(100 * (0.7 * avg_command_f1 + 0.3 * first_cmd_exact_pct / 100), 2)


def _empty_aggregate() -> dict:
    return {
        "steps": 0, "tasks": 0, "avg_ref_cmds": 0, "avg_pred_cmds": 0,
        "valid_json_pct": 0, "has_analysis_pct": 0, "has_plan_pct": 0, "first_cmd_exact_pct": 0,
        "avg_command_precision": 0, "avg_command_recall": 0, "avg_command_f1": 0,
        "complete_true_recall_pct": 0, "premature_complete_rate_pct": 0,
        "by_bucket": {}, "by_source_group": {}, "next_action_score": 0,
    }


def aggregate_scores(per_step_rows: Iterable[dict], scorer: str = CORRECTED) -> dict:
    """SPEC §7 aggregate of per_step rows (the result schema's field names).

    Means are taken over the already-rounded per-step values, in row order. For n = 0 the
    corrected rule (all zeros, empty dicts) is used for both scorers; the legacy harness would
    divide by zero there.
    """
    scorer_rules(scorer)  # validates the name; premature_complete is the same for both (§7)
    rows = list(per_step_rows)
    n = len(rows)
    if n == 0:
        return _empty_aggregate()
    f1s = [r["command_f1"] for r in rows]
    ref_done = [r for r in rows if r.get("ref_task_complete")]
    ref_open = [r for r in rows if not r.get("ref_task_complete")]

    buckets: dict[str, list[float]] = defaultdict(list)
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        buckets[r.get("bucket")].append(r["command_f1"])
        groups[r.get("source_group")].append(r)

    avg_f1 = round(_mean(f1s), 4)
    first_pct = _pct([r["first_cmd_exact"] for r in rows])
    return {
        "steps": n,
        "tasks": len({r.get("task_id") for r in rows}),
        "avg_ref_cmds": round(_mean([_units_len(r.get("ref_command_units")) for r in rows]), 2),
        "avg_pred_cmds": round(_mean([_units_len(r.get("pred_command_units")) for r in rows]), 2),
        "valid_json_pct": _pct([bool(r.get("valid_json")) for r in rows]),
        "has_analysis_pct": _pct([bool(r.get("has_analysis")) for r in rows]),
        "has_plan_pct": _pct([bool(r.get("has_plan")) for r in rows]),
        "first_cmd_exact_pct": first_pct,
        "avg_command_precision": round(_mean([r["command_precision"] for r in rows]), 4),
        "avg_command_recall": round(_mean([r["command_recall"] for r in rows]), 4),
        "avg_command_f1": avg_f1,
        "complete_true_recall_pct": _share_pct(
            sum(bool(r.get("pred_task_complete_true")) for r in ref_done), len(ref_done)
        ),
        "premature_complete_rate_pct": _share_pct(
            sum(bool(r.get("pred_task_complete")) for r in ref_open), len(ref_open)
        ),
        "by_bucket": {
            b: {"steps": len(v), "avg_command_f1": round(_mean(v), 4)}
            for b, v in sorted(buckets.items(), key=lambda kv: str(kv[0]))
        },
        "by_source_group": {
            g: {
                "steps": len(v),
                "avg_command_f1": round(_mean([r["command_f1"] for r in v]), 4),
                "first_cmd_exact_pct": _pct([r["first_cmd_exact"] for r in v]),
            }
            for g, v in sorted(groups.items(), key=lambda kv: str(kv[0]))
        },
        "next_action_score": next_action_score(avg_f1, first_pct),
    }
