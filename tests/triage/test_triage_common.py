"""Triage test data: result files built from the real replay excerpt, and a store holding them.

Runs (all over the 14 scored steps of ../shared/tb2lite/replay_excerpt.jsonl):
- `reference`: the reference replies, stored like a published file (1,200-character preview only);
- `perturbed`: the reference except for 8 steps broken on purpose (invalid JSON, prose around
  JSON, truncated `length`, risky units, missing newline + long duration, missing fields,
  wrong types, empty commands with a premature `task_complete`), with full `raw_output`;
- `checkpoint-100/200/300` of one model: perturbed / reference / perturbed, for the flip table.
Every per-step metric is computed with the lab's scorer, nothing is typed in by hand.
Other triage test modules import the helpers and fixtures from here.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.data import load_replay
from lab.scoring.metrics import score_units
from lab.scoring.parse import extract_json, parse_action
from tests.paths import TB2LITE

SHARED = TB2LITE
EXCERPT = SHARED / "replay_excerpt.jsonl"

# step position (0-based, in replay order) -> perturbation name
PERTURBATIONS = {
    0: "invalid_json",
    1: "prose_around_json",
    2: "truncated",
    3: "risky",
    4: "no_newline_long",
    5: "missing_fields",
    6: "wrong_types",
    7: "empty_commands_premature",
}


def ref_payload(step) -> dict:
    payload = extract_json(step.ref_raw)
    assert isinstance(payload, dict), step.key
    return payload


def perturbed_answer(step, kind: str) -> tuple[str, str]:
    """(raw text, finish_reason) of a deliberately broken answer to `step`."""
    payload = ref_payload(step)
    good = json.dumps({k: payload.get(k) for k in ("analysis", "plan", "commands", "task_complete")}, indent=2)
    if kind == "invalid_json":  # the closing brace is missing: JSON fails, keystrokes fallback applies
        return good.rstrip().rstrip("}") + ',\n  "note": "unfinished"\n', "stop"
    if kind == "prose_around_json":
        return "Sure! Here is the next action:\n```json\n" + good + "\n```\nLet me know if it works.", "stop"
    if kind == "truncated":
        return good[: len(good) // 2], "length"
    if kind == "risky":
        cmds = [{"keystrokes": "rm -rf /\n", "duration": 1.0}, {"keystrokes": "vim main.cpp\n", "duration": 1.0}]
        return json.dumps({"analysis": "clean up", "plan": "wipe", "commands": cmds, "task_complete": False}), "stop"
    if kind == "no_newline_long":
        cmds = [{"keystrokes": "ls -la", "duration": 120}]
        return json.dumps({"analysis": "look", "plan": "list", "commands": cmds, "task_complete": False}), "stop"
    if kind == "missing_fields":
        return json.dumps({"commands": payload.get("commands")}), "stop"
    if kind == "wrong_types":
        return json.dumps({"analysis": "a", "plan": "p", "commands": "ls -la", "task_complete": "no"}), "stop"
    if kind == "empty_commands_premature":
        return json.dumps({"analysis": "done", "plan": "", "commands": [], "task_complete": True}), "stop"
    raise ValueError(kind)


def per_step_row(step, raw: str, finish_reason: str, keep_raw: bool) -> dict:
    """A per_step row in the harness schema, scored with the lab's scorer."""
    pred, ref = parse_action(raw), parse_action(step.ref_raw)
    m = score_units(pred.command_units, ref.command_units, "corrected")
    row = {
        "task_id": step.task_id, "sample_idx": step.sample_idx, "step_idx": step.step_idx,
        "source_group": step.source_group, "bucket": step.bucket,
        "valid_json": pred.valid_json, "has_analysis": pred.has_analysis, "has_plan": pred.has_plan,
        "ref_task_complete": bool(ref.task_complete), "pred_task_complete": pred.task_complete,
        "pred_task_complete_true": bool(pred.task_complete) and bool(ref.task_complete),
        "ref_command_units": ref.command_units, "pred_command_units": pred.command_units,
        "first_cmd_exact": m.first_cmd_exact, "command_precision": m.precision,
        "command_recall": m.recall, "command_f1": m.f1,
        "pred_preview": raw[:1200], "finish_reason": finish_reason, "stop_reason": None,
    }  # fmt: skip
    if keep_raw:
        row["raw_output"] = raw
    return row


def build_result(steps, model: str, perturb: bool, keep_raw: bool, model_path: str | None = None) -> dict:
    rows = []
    for i, step in enumerate(steps):
        kind = PERTURBATIONS.get(i) if perturb else None
        raw, finish = perturbed_answer(step, kind) if kind else (step.ref_raw, "stop")
        rows.append(per_step_row(step, raw, finish, keep_raw))
    return {
        "model": model, "model_short": model, "model_path": model_path or f"/models/{model}",
        "timestamp": "2026-05-01T00:00:00", "gen_time_sec": 1.0, "load_time_sec": 1.0,
        "avg_sec_per_step": round(1.0 / len(rows), 3), "per_step": rows,
    }  # fmt: skip


def write_results(folder: Path) -> dict[str, Path]:
    """Write the five result files; returns model name -> path."""
    steps = load_replay(str(EXCERPT), mode="corrected").steps
    folder.mkdir(parents=True, exist_ok=True)
    specs = {
        "reference": dict(perturb=False, keep_raw=False),
        "perturbed": dict(perturb=True, keep_raw=True),
        "series-checkpoint-100": dict(perturb=True, keep_raw=True, model_path="/ckpt/series/checkpoint-100"),
        "series-checkpoint-200": dict(perturb=False, keep_raw=True, model_path="/ckpt/series/checkpoint-200"),
        "series-checkpoint-300": dict(perturb=True, keep_raw=True, model_path="/ckpt/series/checkpoint-300"),
    }
    paths = {}
    for model, kw in specs.items():
        p = folder / f"{model}.json"
        result = build_result(steps, model, **kw)
        if model == "series-checkpoint-300":  # differ from checkpoint-100: step 0 is right again
            result["per_step"][0] = build_result(steps[:1], model, perturb=False, keep_raw=True)["per_step"][0]
        p.write_text(json.dumps(result), encoding="utf-8")
        paths[model] = p
    return paths


@pytest.fixture(scope="module")
def triage_store(tmp_path_factory):
    """A real DuckDB store (lab.store) with the five runs imported and step_flags materialized."""
    if not EXCERPT.is_file():
        pytest.skip(f"reference data {EXCERPT} is missing")
    from lab.store.opening import open_store
    from lab.triage import refresh_step_flags

    root = tmp_path_factory.mktemp("triage")
    write_results(root / "results" / "runs")
    store = open_store(root / "lab.duckdb", root / "results")
    refresh_step_flags(store)
    yield store
    store.close()


def run_id(store, model: str) -> str:
    return store.query("SELECT run_id FROM runs WHERE model = ?", [model])["run_id"][0]


def step_keys(store) -> list[str]:
    df = store.query("SELECT step_key FROM steps WHERE run_id = ? ORDER BY ord", [run_id(store, "reference")])
    return list(df["step_key"])


# --- checks of the test data itself ---------------------------------------------------------------

def test_reference_run_scores_every_step_perfectly(triage_store):
    df = triage_store.query(
        "SELECT command_f1, valid_json FROM steps WHERE run_id = ?", [run_id(triage_store, "reference")]
    )
    assert len(df) == 14
    assert (df["command_f1"] == 1.0).all() and df["valid_json"].all()


def test_perturbed_run_differs_exactly_on_the_perturbed_steps(triage_store):
    ref, bad = run_id(triage_store, "reference"), run_id(triage_store, "perturbed")
    df = triage_store.query(
        "SELECT a.ord FROM steps a JOIN steps b USING (step_key) WHERE a.run_id = ? AND b.run_id = ?"
        " AND a.pred_preview <> b.pred_preview ORDER BY a.ord",
        [ref, bad],
    )
    assert list(df["ord"]) == sorted(PERTURBATIONS)
