"""What-if edits: the edit model, applying each field to a Step, the caps, and the prompt diff."""
from __future__ import annotations

import pytest

from lab.data import load_replay, split_context
from lab.data.history import flatten_history
from lab.data.step import Step
from lab.prompts.contracts import harness_messages, initial_screen
from lab.whatif import (EditError, FieldEdit, WhatIf, apply_edit, apply_whatif, check_whatif, diff_html,
                        field_spans, field_text, limits, unified_diff)
from lab.whatif.diff import patch_html
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def steps() -> dict[str, Step]:
    return load_replay(str(EXCERPT)).by_key


def later_step(steps) -> Step:
    """A step with earlier turns and its own screen message (task-000/2)."""
    return steps["task-000/2"]


def with_system(step: Step) -> Step:
    messages = ({"role": "system", "content": "You are a terminal agent."}, *step.messages)
    return Step(step.task_id, step.sample_idx, step.step_idx, step.total_steps, step.is_final_step, step.source,
                step.source_group, messages, flatten_history(messages), step.ref_raw)


def test_fields_follow_compare_context(steps):
    step = later_step(steps)
    ctx = split_context(step)
    spans = {s.field: s for s in field_spans(step)}
    assert list(spans)[:2] == ["system", "task"] and list(spans)[-1] == "screen"
    assert field_text(step, "task") == ctx.task and field_text(step, "screen") == ctx.screen
    assert [field_text(step, f"turn:{n}") for n in range(len(ctx.turns))] == [c for _, c in ctx.turns]
    assert field_text(step, "system") == "" and "adds one" in spans["system"].label


def test_screen_edit_on_a_later_step_changes_only_that_message(steps):
    step = later_step(steps)
    old = field_text(step, "screen")
    edited = apply_edit(step, FieldEdit("screen", old, "root@box:/app# ls\nmain.py\n"))
    assert split_context(edited).screen == "root@box:/app# ls\nmain.py\n"
    changed = [i for i, (a, b) in enumerate(zip(step.messages, edited.messages)) if a != b]
    assert len(edited.messages) == len(step.messages) and len(changed) == 1
    assert edited.prompt == flatten_history(edited.messages) != step.prompt
    assert edited.key == step.key and edited.ref_raw == step.ref_raw  # scored against the same reference
    assert step.messages[changed[0]]["content"] == old  # the original step is untouched


def test_screen_edit_on_the_first_step_replaces_the_initial_screen_inside_the_task(steps):
    step = steps["task-000/0"]
    old = field_text(step, "screen")
    assert old == step.messages[0]["content"][-len(old):] and old.strip() == initial_screen(step.messages[0]["content"])
    edited = apply_edit(step, FieldEdit("screen", old, "root@box:/# pwd\n/\n"))
    task = edited.messages[0]["content"]
    assert task.endswith("Current terminal state:\nroot@box:/# pwd\n/\n")
    assert task[: -len("root@box:/# pwd\n/\n")] == step.messages[0]["content"][: -len(old)]


def test_task_and_turn_edits(steps):
    step = later_step(steps)
    task_old = field_text(step, "task")
    edited = apply_edit(step, FieldEdit("task", task_old, "Task Description:\nPrint hello.\n"))
    assert split_context(edited).task == "Task Description:\nPrint hello.\n"
    turn_old = field_text(step, "turn:1")
    edited = apply_edit(step, FieldEdit("turn:1", turn_old, "(no output)"))
    assert split_context(edited).turns[1][1] == "(no output)"
    assert split_context(edited).turns[0] == split_context(step).turns[0]


def test_system_edit_adds_a_message_then_replaces_it(steps):
    step = later_step(steps)
    added = apply_edit(step, FieldEdit("system", "", "Answer with JSON only."))
    assert added.messages[0] == {"role": "system", "content": "Answer with JSON only."}
    assert len(added.messages) == len(step.messages) + 1 and harness_messages(added)[0][0]["role"] == "system"
    replaced = apply_edit(with_system(step), FieldEdit("system", "You are a terminal agent.", "Be brief."))
    assert replaced.messages[0]["content"] == "Be brief." and len(replaced.messages) == len(step.messages) + 1


def test_several_edits_apply_in_order(steps):
    step = later_step(steps)
    whatif = WhatIf(step.key, (FieldEdit("system", "", "S"), FieldEdit("screen", field_text(step, "screen"), "X")))
    edited = apply_whatif(step, whatif)
    assert split_context(edited).system == "S" and split_context(edited).screen == "X"


def test_stale_unknown_and_wrong_step_edits_are_refused(steps):
    step = later_step(steps)
    with pytest.raises(EditError, match="no longer the edit's old text"):
        apply_edit(step, FieldEdit("screen", "something else", "X"))
    with pytest.raises(EditError, match="unknown"):
        apply_edit(step, FieldEdit("prompt", "", "X"))
    with pytest.raises(EditError, match="turn:N"):
        apply_edit(step, FieldEdit("turn:x", "", "X"))
    with pytest.raises(EditError, match="has no field 'turn:99'"):
        apply_edit(step, FieldEdit("turn:99", "", "X"))
    with pytest.raises(EditError, match="not task-000/0"):
        apply_whatif(steps["task-000/0"], WhatIf(step.key, (FieldEdit("system", "", "X"),)))


def test_size_caps_and_empty_edits():
    cap = limits()
    with pytest.raises(EditError, match="over the cap"):
        check_whatif(WhatIf("t/0", (FieldEdit("screen", "", "x" * (cap["max_field_chars"] + 1)),)))
    with pytest.raises(EditError, match="adds"):
        check_whatif(WhatIf("t/0", (FieldEdit("screen", "", "x" * (cap["max_added_chars"] + 1)),)))
    with pytest.raises(EditError, match="changes nothing"):
        check_whatif(WhatIf("t/0", (FieldEdit("screen", "same", "same"),)))
    with pytest.raises(EditError, match="at most"):
        check_whatif(WhatIf("t/0", tuple(FieldEdit("system", "", str(i)) for i in range(cap["max_edits_per_whatif"] + 1))))
    with pytest.raises(EditError, match="note"):
        check_whatif(WhatIf("t/0", (FieldEdit("system", "", "x"),), note="n" * (cap["max_note_chars"] + 1)))


def test_edit_id_is_stable_and_round_trips():
    a = WhatIf("task-000/2", (FieldEdit("screen", "old", "new"),), note="n", created_by="me")
    b = WhatIf("task-000/2", (FieldEdit("screen", "old", "new"),))
    assert a.edit_id == b.edit_id and a.edit_id.startswith("wi-")
    assert a.edit_id != WhatIf("task-000/2", (FieldEdit("screen", "old", "newer"),)).edit_id
    assert WhatIf.from_dict(a.to_dict()) == a
    with pytest.raises(EditError, match="missing"):
        WhatIf.from_dict({"edits": []})


def test_unified_diff_and_escaped_html():
    original = "line one\n<b>screen</b> & more\nline three\n"
    edited = "line one\n<i>screen</i> & more\nline three\n"
    patch = unified_diff(original, edited)
    assert "-<b>screen</b> & more\n+<i>screen</i> & more\n" in patch and patch.startswith("--- original")
    html = diff_html(original, edited)
    assert "<b>screen" not in html and "&lt;" in html and "&amp; more" in html
    assert "<del>b</del>" in html and "<ins>i</ins>" in html and "+1 −1 lines" in html
    assert "does not change" in diff_html(original, original) and unified_diff(original, original) == ""
    stored = patch_html(patch)
    assert 'lab-dl-del">-&lt;b&gt;' in stored and 'lab-dl-add">+&lt;i&gt;' in stored and "+1 −1" in stored


def test_diff_is_compact_on_long_prompts():
    original = "\n".join(f"line {i}" for i in range(1000))
    edited = original.replace("line 500", "line five hundred")
    html = diff_html(original, edited)
    assert html.count('class="lab-dl ') == 1 + 2 + 2 + 2  # hunk header, 2+2 context, 1 removed, 1 added
