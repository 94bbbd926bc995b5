"""Output contracts: the harness's JSON contract and the GRPO card's bash-block contract."""
from __future__ import annotations

import json

import pytest

from lab.data import load_replay
from lab.data.step import Step
from lab.errors import LabError
from lab.prompts import contract_names, get_contract
from tests.paths import EXCERPT


@pytest.fixture(scope="module")
def replay():
    if not EXCERPT.exists():
        pytest.skip(f"{EXCERPT} missing")
    return load_replay(EXCERPT, mode="all")


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in EXCERPT.read_text(encoding="utf-8").splitlines() if line.strip()]


def _step(messages, prompt="USER:\nfallback") -> Step:
    return Step("task-009", 9, 1, 3, False, "", "unknown", tuple(messages), prompt, '{"commands": []}')


def test_registry():
    assert contract_names()[0] == "tb2lite-json" and {"bash-block", "bash-block-chat"} <= set(contract_names())
    assert get_contract().name == get_contract(None).name == "tb2lite-json"
    with pytest.raises(LabError, match="unknown output contract 'xml'.*tb2lite-json"):
        get_contract("xml")


def test_json_contract_messages_and_parse(replay, rows):
    contract = get_contract("tb2lite-json")
    step = replay.by_key["task-000/5"]
    messages, fallback = contract.build_messages(step)
    assert messages == list(step.messages) and fallback == step.prompt
    kept, _ = contract.build_messages(_step([
        {"role": "system", "content": "s"}, {"role": "robot", "content": "x"},
        {"role": "user", "content": None}, "text", {"role": "tool", "content": "t"},
    ]))
    assert kept == [{"role": "system", "content": "s"}, {"role": "tool", "content": "t"}]
    empty, fallback = contract.build_messages(_step([{"role": "user", "content": 3}]))
    assert empty == [{"role": "user", "content": "USER:\nfallback"}] and fallback == "USER:\nfallback"
    parsed = contract.parse(step.ref_raw)
    assert parsed.valid_json and parsed.command_units == rows[5]["ref_command_units"]


def test_card_prompt_holds_task_and_latest_screen(replay, rows):
    contract = get_contract("bash-block")
    messages, fallback = contract.build_messages(replay.by_key["task-000/5"])
    assert len(messages) == 1 and messages[0] == {"role": "user", "content": fallback}
    assert fallback.startswith(
        "### System: You are a local OS Terminal Controller Agent. State your thinking process within "
        "<thinking> tags, followed by the exact terminal command block.\n### Instruction: # CMake Dependency"
    )
    assert fallback.endswith(rows[5]["prompt"].strip()[-200:] + "\n### Output:")
    assert "Format your response as JSON" not in fallback and "\nCurrent terminal output:\n" in fallback
    first, _ = contract.build_messages(replay.by_key["task-000/0"])
    screen = rows[0]["prompt"].split("Current terminal state:\n")[-1].strip()
    assert first[0]["content"].endswith("Current terminal output:\n" + screen + "\n### Output:")


def test_chat_contract_shows_history_in_its_own_format(replay, rows):
    contract = get_contract("bash-block-chat")
    messages, fallback = contract.build_messages(replay.by_key["task-000/5"])
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 5 + ["user"]
    assert "exactly ONE fenced code block" in messages[0]["content"]
    assert "Format your response as JSON" not in messages[1]["content"] and "# CMake Dependency" in messages[1]["content"]
    # earlier valid references are shown as <thinking> + bash block and parse back to their units
    for i in (0, 1, 2, 4):
        parsed = contract.parse(messages[2 + 2 * i]["content"])
        assert parsed.valid_json and parsed.failure is None
        assert parsed.command_units == rows[i]["ref_command_units"]
    assert messages[8]["content"] == rows[3]["ref_raw"]  # the invalid reference stays verbatim
    assert messages[-1]["content"] == rows[5]["prompt"] and fallback == replay.by_key["task-000/5"].prompt


@pytest.mark.parametrize(
    "text, valid, failure, units, analysis",
    [
        ("<thinking>look</thinking>\n```bash\nls -la\n\ncd /app && ls  \n```", True, None, ["ls -la", "cd /app && ls"], "look"),
        ("  <thinking>\n two \n</thinking>```bash\nC-c\n```\n", True, None, ["C-c"], "two"),
        ("<thinking>x</thinking>\nls -la", False, "no_bash_block", [], "x"),
        ("```bash\npwd\n```", False, "no_thinking", ["pwd"], None),
        ("<thinking></thinking>\n```bash\npwd\n```", False, "no_thinking", ["pwd"], ""),
        ("<thinking>x</thinking>\n```bash\npwd\n```\nDone!", False, "extra_text", ["pwd"], "x"),
        ("<thinking>x</thinking>\n```bash\npwd\n```\n```bash\nls\n```", False, "extra_text", ["pwd"], "x"),
        # the card's regex accepts a whitespace-only block; it is a wait
        ("<thinking>x</thinking>\n```bash\n  \n```", True, None, ["<WAIT>"], "x"),
    ],
)
def test_bash_block_parse(text, valid, failure, units, analysis):
    parsed = get_contract("bash-block").parse(text)
    assert (parsed.valid_json, parsed.failure, parsed.command_units) == (valid, failure, units)
    assert parsed.analysis == analysis and parsed.has_analysis == bool(analysis)
    assert parsed.task_complete is None and not parsed.has_plan and parsed.contract == "bash-block"


def test_legacy_flat_contract_sends_the_flattened_history_as_one_user_turn():
    from lab.data import load_replay
    from tests.paths import EXCERPT

    step = load_replay(EXCERPT, mode="all").by_key["task-000/2"]
    messages, fallback = get_contract("legacy-flat").build_messages(step)
    assert messages == [{"role": "user", "content": step.prompt}] and fallback == step.prompt
    assert step.prompt.startswith("USER:\n") and step.prompt.count("\n\nASSISTANT:\n") == 2
    # answers are parsed by the harness's JSON parser, like the corrected evaluator's
    assert get_contract("legacy-flat").parse(step.ref_raw).command_units == get_contract().parse(step.ref_raw).command_units
