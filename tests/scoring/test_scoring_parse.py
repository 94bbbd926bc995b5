"""Output parsing (SPEC §4) and the deliberate decisions about non-object JSON."""
import json

import pytest

from lab.scoring import extract_json, parse_action


def action_text(commands, **extra):
    return json.dumps({"analysis": "a", "plan": "p", "commands": commands, **extra})


def test_valid_json_fields():
    a = parse_action(action_text([{"keystrokes": "ls\n"}], task_complete=False))
    assert (a.valid_json, a.has_analysis, a.has_plan, a.task_complete, a.command_units) == (True, True, True, False, ["ls"])
    assert a.failure is None and not a.units_from_fallback
    assert a.analysis == "a" and a.plan == "p" and a.commands == [{"keystrokes": "ls\n"}]


def test_task_complete_kept_only_when_bool():
    assert parse_action(action_text([], task_complete="true")).task_complete is None
    assert parse_action(action_text([], task_complete=1)).task_complete is None
    assert parse_action(action_text([], task_complete=True)).task_complete is True


def test_fenced_json_and_greedy_span():
    text = 'Here:\n```json\n{"commands": [{"keystrokes": "pwd\\n"}]}\n```\ntrailing {brace'
    assert parse_action(text).command_units == ["pwd"]
    assert parse_action(text).valid_json
    two = '```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```'
    assert extract_json(two) is None  # greedy: the span covers both objects


def test_braces_in_think_text_break_the_slice_and_fallback_recovers():
    text = '<think>use {x} here</think>\n' + action_text([{"keystrokes": "make\n"}])
    a = parse_action(text)
    assert not a.valid_json and a.failure == "invalid_json"
    assert a.command_units == ["make"] and a.units_from_fallback


def test_fallback_runs_on_valid_json_with_empty_commands():
    text = '{"analysis": "run \\"keystrokes\\": \\"x\\"", "commands": [], "note": {"keystrokes": "ls -la\\n"}}'
    a = parse_action(text)
    assert a.valid_json and a.units_from_fallback
    assert a.command_units == ["ls -la"]


def test_fallback_no_wait_and_unicode_escape():
    text = '{"commands": [{"keystrokes": ""}, {"keystrokes": "echo \\u00e9\\tx\\nls"}'  # truncated JSON
    a = parse_action(text)
    assert a.failure == "invalid_json"
    assert a.command_units == ["echo é\tx", "ls"]
    raw_utf8 = '"keystrokes": "echo é"'  # non-ASCII is mangled by unicode_escape, as in the harness
    assert parse_action(raw_utf8).command_units == ["echo Ã©"]


def test_no_json_kind():
    a = parse_action("I think you should run ls.")
    assert (a.valid_json, a.failure, a.command_units) == (False, "no_json", [])


@pytest.mark.parametrize("text", ["42", "[1]", "true", '"x"', "null"])
def test_non_object_json_is_treated_as_invalid(text):
    assert extract_json(text) is not None or text == "null"
    a = parse_action(text)
    assert (a.valid_json, a.failure, a.command_units, a.task_complete) == (False, "not_an_object", [], None)


def test_non_list_commands_give_no_units():
    a = parse_action('{"commands": "ls"}')
    assert a.valid_json and a.command_units == [] and a.commands == []
