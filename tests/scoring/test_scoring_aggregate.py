"""SPEC §7 aggregates and the task-complete rules of both scorers."""
from lab.scoring import aggregate_scores, next_action_score, task_complete_fields


def row(task, step, bucket, group, f1, fce, valid=True, ref_tc=False, pred_tc=False, scorer="corrected"):
    return {"task_id": task, "step_idx": step, "bucket": bucket, "source_group": group,
            "command_f1": f1, "command_precision": f1, "command_recall": f1, "first_cmd_exact": fce,
            "valid_json": valid, "has_analysis": valid, "has_plan": False,
            "ref_command_units": ["a", "b"], "pred_command_units": ["a"],
            **task_complete_fields(pred_tc, ref_tc, scorer)}


def test_next_action_score_worked_values():
    assert next_action_score(0.3992, 41.9) == 40.51
    assert next_action_score(0.5085, 51.5) == 51.04
    assert next_action_score(0.2743, 24.4) == 26.52


def test_task_complete_rules():
    assert task_complete_fields(True, False, "corrected")["pred_task_complete_true"] is False
    assert task_complete_fields(True, False, "legacy")["pred_task_complete_true"] is True
    assert task_complete_fields(True, 1, "corrected") == {"ref_task_complete": True, "pred_task_complete": True,
                                                          "pred_task_complete_true": True}
    assert task_complete_fields(None, True, "legacy")["pred_task_complete_true"] is False


def test_empty_aggregate():
    agg = aggregate_scores([])
    assert agg["steps"] == 0 and agg["tasks"] == 0 and agg["by_bucket"] == {} and agg["by_source_group"] == {}
    assert agg["avg_command_f1"] == 0 and agg["next_action_score"] == 0


def test_aggregate_values():
    rows = [
        row("task-000", 0, "early", "math", 0.5, 1.0, ref_tc=False, pred_tc=True),
        row("task-000", 5, "late", "code", 0.25, 0.0, valid=False),
        row("task-001", 2, "mid", "code", 0.3333, 1.0, ref_tc=True, pred_tc=True),
    ]
    agg = aggregate_scores(rows)
    assert agg["steps"] == 3 and agg["tasks"] == 2
    assert agg["avg_ref_cmds"] == 2.0 and agg["avg_pred_cmds"] == 1.0
    assert agg["valid_json_pct"] == 66.7 and agg["has_plan_pct"] == 0.0
    assert agg["first_cmd_exact_pct"] == 66.7
    assert agg["avg_command_f1"] == round((0.5 + 0.25 + 0.3333) / 3, 4)
    assert agg["complete_true_recall_pct"] == 100.0
    assert agg["premature_complete_rate_pct"] == 50.0
    assert list(agg["by_bucket"]) == ["early", "late", "mid"]
    assert list(agg["by_source_group"]) == ["code", "math"]
    assert agg["by_source_group"]["code"] == {"steps": 2, "avg_command_f1": round((0.25 + 0.3333) / 2, 4),
                                              "first_cmd_exact_pct": 50.0}
    assert agg["next_action_score"] == next_action_score(agg["avg_command_f1"], agg["first_cmd_exact_pct"])
