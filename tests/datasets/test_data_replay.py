"""Replay loading (SPEC §1–§2): the excerpt in both modes, histories, validation, conversations."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.data import (
    dev_subset,
    flatten_history,
    load_replay,
    split_context,
    step_record,
    steps_from_conversations,
)
from lab.errors import LabError, ReplayFormatError
from tests.paths import EXCERPT

CORRECTED_KEYS = [
    "task-000/0", "task-000/1", "task-000/2", "task-000/4", "task-000/5", "task-000/6", "task-000/7",
    "task-001/0", "task-001/1", "task-001/2", "task-001/3", "task-001/5", "task-001/6", "task-001/7",
]


@pytest.fixture(scope="module")
def excerpt_rows() -> list[dict]:
    if not EXCERPT.exists():
        pytest.skip(f"{EXCERPT} missing")
    return [json.loads(line) for line in EXCERPT.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corrected(excerpt_rows):
    return load_replay(str(EXCERPT))


@pytest.fixture(scope="module")
def everything(excerpt_rows):
    return load_replay(EXCERPT, mode="all")


def test_corrected_mode_drops_invalid_and_empty_refs(corrected):
    assert [s.key for s in corrected.steps] == CORRECTED_KEYS
    assert corrected.tasks == ["task-000", "task-001"]
    assert corrected.problems == []
    manifest = corrected.manifest()
    assert manifest["num_tasks"] == 2 and manifest["num_steps"] == 14
    assert manifest["buckets"] == {"early": 4, "mid": 4, "late": 6}
    assert manifest["source_groups"] == ["software_engineering"]


def test_all_mode_keeps_every_turn(everything, excerpt_rows):
    assert len(everything.steps) == 16
    assert not everything.by_key["task-000/3"].ref_parse_ok
    assert not everything.by_key["task-001/4"].ref_parse_ok
    assert [s.step_idx for s in everything.steps_for_task("task-001")] == list(range(8))
    assert everything.steps_for_task("task-999") == []
    final = everything.by_key["task-000/7"]
    assert final.is_final_step and final.total_steps == 8 and final.line_no == 8
    assert final.extra["ref_command_units"] == excerpt_rows[7]["ref_command_units"]


def test_history_is_rebuilt_cumulatively(corrected, excerpt_rows):
    step = corrected.by_key["task-000/5"]
    expected = []
    for row in excerpt_rows[:5]:
        expected += [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["ref_raw"]}]
    expected.append({"role": "user", "content": excerpt_rows[5]["prompt"]})
    assert list(step.messages) == expected
    # the invalid (unscored) step-3 reference stays in the history verbatim
    assert step.messages[7] == {"role": "assistant", "content": excerpt_rows[3]["ref_raw"]}
    assert step.ref_raw == excerpt_rows[5]["ref_raw"]
    assert not any(m["role"] == "system" for m in step.messages)
    assert step.prompt == flatten_history(expected)
    assert step.prompt.startswith("USER:\n" + excerpt_rows[0]["prompt"][:40])
    first = corrected.by_key["task-001/0"]
    assert list(first.messages) == [{"role": "user", "content": excerpt_rows[8]["prompt"]}]


def test_split_context(corrected, excerpt_rows):
    ctx = split_context(corrected.by_key["task-000/5"])
    assert ctx.task == excerpt_rows[0]["prompt"]
    assert ctx.screen == excerpt_rows[5]["prompt"]
    assert len(ctx.turns) == 9 and ctx.turns[0] == ("assistant", excerpt_rows[0]["ref_raw"])
    assert split_context(corrected.by_key["task-000/0"]).screen == ""


def _conversations_from_excerpt(rows: list[dict]) -> list[dict]:
    """Rebuild source conversations from the per-turn excerpt, with extras the walk must drop/skip."""
    out = []
    for task in ("task-000", "task-001"):
        turns = [r for r in rows if r["task_id"] == task]
        conversation = [{"role": "assistant", "content": "greeting before any history"}]
        for r in turns:
            conversation += [
                {"role": "user", "content": r["prompt"]},
                {"role": "narrator", "content": "dropped: unknown role"},
                {"role": "user", "content": ["dropped: not a string"]},
                {"role": "assistant", "content": r["ref_raw"]},
            ]
        out.append({"conversations": conversation, "_source_file": turns[0]["source"]})
    return out


def test_conversations_walk_matches_the_builder(excerpt_rows, corrected, tmp_path):
    rows = _conversations_from_excerpt(excerpt_rows)
    steps = steps_from_conversations(rows)
    # the leading assistant is skipped without moving the counter, but counts in total_steps
    assert [s.key for s in steps] == CORRECTED_KEYS
    assert all(s.total_steps == 9 for s in steps)
    assert not any(s.is_final_step for s in steps)
    for built, loaded in zip(steps, corrected.steps):
        assert list(built.messages) == list(loaded.messages)
        assert built.source_group == "software_engineering"
    ref = excerpt_rows[5]
    assert steps[4].extra["ref_command_units"] == ref["ref_command_units"]
    assert steps[4].extra["ref_commands"] == ref["ref_commands"]
    assert len(steps_from_conversations(rows, include_invalid_refs=True)) == 14  # invalid refs have no units
    assert len(steps_from_conversations(rows, include_invalid_refs=True, include_empty_command_refs=True)) == 16
    # a source file with the same rows loads through load_replay too, and round-trips as records
    src = tmp_path / "eval_dataset.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    assert [s.key for s in load_replay(src).steps] == CORRECTED_KEYS
    assert len(load_replay(src, mode="all").steps) == 16
    full = tmp_path / "replay_full.jsonl"
    full.write_text("".join(json.dumps(step_record(s)) + "\n" for s in steps_from_conversations(src)), encoding="utf-8")
    again = load_replay(full, mode="all")
    assert [s.key for s in again.steps] == CORRECTED_KEYS
    assert again.manifest()["formats"] == {"messages": 14}
    assert list(again.by_key["task-000/5"].messages) == list(corrected.by_key["task-000/5"].messages)


def test_dev_subset_rule():
    groups = {f"task-{i:03d}": g for i, g in enumerate(["b", "a", "b", "c", "a", "b", "c", "a"])}
    chosen = dev_subset(groups, n=5, seed=42)
    assert len(chosen) == 5 and len(set(chosen)) == 5
    # round-robin over sorted groups: a, b, c, a, b
    assert [groups[t] for t in chosen] == ["a", "b", "c", "a", "b"]
    assert dev_subset(groups, n=5, seed=42) == chosen
    assert sorted(dev_subset(groups, n=50)) == sorted(groups)


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _good(step_idx: int = 0) -> str:
    return json.dumps({"task_id": "task-000", "sample_idx": 0, "step_idx": step_idx, "prompt": "hi",
                       "ref_raw": '{"commands": [{"keystrokes": "ls\\n"}]}'})


def test_malformed_line_names_file_line_and_field(tmp_path):
    path = _write(tmp_path, [_good(0), "", '{"task_id": "task-000", "step_idx": 1, "prompt": "x"'])
    with pytest.raises(ReplayFormatError) as info:
        load_replay(path)
    assert info.value.line == 3 and info.value.path == str(path) and info.value.field is None
    assert f"{path}:3" in str(info.value) and "malformed JSON" in str(info.value)


@pytest.mark.parametrize(
    "record, field, words",
    [
        ({"task_id": "task-000", "step_idx": 0, "prompt": "x"}, "ref_raw", "missing required field"),
        ({"task_id": "task-000", "step_idx": "0", "prompt": "x", "ref_raw": "{}"}, "step_idx", "wrong type"),
        ({"task_id": "task-000", "step_idx": True, "prompt": "x", "ref_raw": "{}"}, "step_idx", "wrong type"),
        ({"task_id": "task-000", "step_idx": 0, "messages": "hi", "ref_raw": "{}"}, "messages", "wrong type"),
        ({"task_id": "task-000", "step_idx": 0, "ref_raw": "{}"}, "prompt", "`messages` or a `prompt`"),
    ],
)
def test_field_problems(tmp_path, record, field, words):
    path = _write(tmp_path, [_good(0), json.dumps(record)])
    with pytest.raises(ReplayFormatError) as info:
        load_replay(path)
    assert (info.value.line, info.value.field) == (2, field)
    assert words in info.value.problem and f"{path}:2 field '{field}'" in str(info.value)


def test_lenient_loading_collects_problems(tmp_path):
    path = _write(tmp_path, [_good(0), "not json", "[1, 2]", "", json.dumps({"task_id": 3}), _good(1)])
    loaded = load_replay(path, lenient=True)
    assert [s.key for s in loaded.steps] == ["task-000/0", "task-000/1"]
    assert [(p.line, p.field) for p in loaded.problems] == [(2, None), (3, None), (5, "task_id"), (5, "step_idx"), (5, "ref_raw")]
    assert loaded.manifest()["problems"] == 5


def test_missing_or_unusable_source_is_a_clear_error(tmp_path):
    with pytest.raises(LabError, match=r"nothere\.jsonl.*--replay PATH"):
        load_replay(tmp_path / "nothere.jsonl")
    with pytest.raises(LabError, match="--replay PATH"):
        load_replay(str(tmp_path / "missing" / "replay.txt"))
    with pytest.raises(LabError, match="unknown replay mode"):
        load_replay(EXCERPT, mode="some")


def test_no_source_uses_settings(tmp_path):
    from lab.settings import Settings

    settings = Settings(results_dir=tmp_path, cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    assert len(load_replay(None, settings=settings).steps) == 14
    with pytest.raises(LabError, match="--replay PATH"):
        load_replay(None, settings=Settings(results_dir=tmp_path, cache_dir=tmp_path / "cache", replay_path=None))
