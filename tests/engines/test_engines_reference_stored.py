"""The reference and stored engines on the replay excerpt and golden stored rows."""
from __future__ import annotations

import json

import pytest

from lab.data import load_replay
from lab.engines import Request, Sampling, create_engine
from lab.errors import EngineLoadError
from lab.scoring.metrics import score_units
from lab.scoring.parse import parse_action


@pytest.fixture(scope="module")
def steps(shared_dir):
    return load_replay(shared_dir / "replay_excerpt.jsonl", mode="corrected").steps


@pytest.fixture(scope="module")
def golden_rows(shared_dir):
    rows = [json.loads(line) for line in (shared_dir / "golden_visible.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["scoring_version"] == "corrected_303" and r["task_id"] == "task-000"]


def test_reference_engine_answers_with_the_reference_and_scores_100(steps):
    engine = create_engine("reference")
    engine.load()
    seen = []
    completions = engine.generate([Request(s, "ignored") for s in steps], Sampling(), on_done=lambda i, c: seen.append(i))
    assert seen == list(range(len(steps)))
    for step, completion in zip(steps, completions):
        assert completion.text == step.ref_raw and completion.finish_reason == "stop" and completion.error is None
        units = parse_action(completion.text).command_units
        assert score_units(units, parse_action(step.ref_raw).command_units).f1 == 1.0
    assert engine.describe().kind == "reference"


def write_result(path, rows, **top):
    path.write_text(json.dumps({"model": "tiny", "model_short": "golden-run", "aggregate": {}, "per_step": rows, **top}))
    return path


def test_stored_engine_replays_rows_and_reports_missing_steps(tmp_path, steps, golden_rows):
    path = write_result(tmp_path / "run.json", golden_rows, model_path="org/Golden-Model")
    engine = create_engine(f"stored:{path}")
    engine.load()
    assert engine.name == "run" and engine.model_id == "org/Golden-Model"
    assert engine.describe().notes.startswith("golden-run: 6 stored steps")
    task0 = [s for s in steps if s.task_id == "task-000"]
    order = []
    completions = engine.generate([Request(s, "") for s in task0], Sampling(), on_done=lambda i, c: order.append(i))
    assert order == list(range(len(task0)))
    by_key = {f"{r['task_id']}/{r['step_idx']}": r for r in golden_rows}
    for step, completion in zip(task0, completions):
        row = by_key.get(step.key)
        if row is None:  # task-000/5 is not among the golden rows
            assert completion.error == f"step {step.key} is not in {path}"
            continue
        assert completion.error is None
        assert completion.text == row["pred_preview"]
        assert completion.command_units == row["pred_command_units"]
        assert completion.finish_reason == row["finish_reason"]
        assert completion.stored == row
    assert any(c.error for c in completions) and sum(c.error is None for c in completions) == len(golden_rows)


def test_stored_engine_prefers_raw_output_and_decodes_repr_units(tmp_path, steps):
    step = steps[0]
    row = {
        "task_id": step.task_id, "step_idx": step.step_idx, "raw_output": "FULL TEXT", "pred_preview": "FULL",
        "pred_command_units": "['ls -la', \"cat 'a b'\"]", "finish_reason": "length",
    }
    engine = create_engine(f"stored:{write_result(tmp_path / 'legacy.json', [row])}?name=Legacy run")
    engine.load()
    [completion] = engine.generate([Request(step, "")], Sampling())
    assert engine.name == "Legacy run"
    assert completion.text == "FULL TEXT" and completion.finish_reason == "length"
    assert completion.command_units == ["ls -la", "cat 'a b'"]


@pytest.mark.parametrize("content, message", [(None, "no such result file"), ("{not json", "invalid JSON"), ("[]", "top level")])
def test_stored_engine_load_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    engine = create_engine(f"stored:{path}")
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    assert str(path) in str(err.value) and message in str(err.value)
