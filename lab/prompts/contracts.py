"""Prompt/output contracts (DESIGN §2): how a step becomes messages and how an answer becomes
command units. Registry: `tb2lite-json` (default), `legacy-flat`, `bash-block`, `bash-block-chat`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from lab.data.context import split_context
from lab.data.history import HISTORY_ROLES, builder_parse_ref, builder_ref_ok
from lab.data.step import Step
from lab.prompts.templates import load_template_data
from lab.scoring.action import ParsedAction
from lab.tb2lite import DEFAULT_CONTRACT

Messages = list[dict]


@dataclass(frozen=True)
class Contract:
    """A named pair: `build_messages(step) -> (messages, fallback_prompt)` and `parse(raw) -> ParsedAction`."""

    name: str
    description: str
    build_messages: Callable[[Step], tuple[Messages, str]]
    parse: Callable[[str], ParsedAction]
    # True when the contract's prompt is plain text sent verbatim (the GRPO card's
    # `### System / ### Instruction / ### Output` format), never wrapped in a chat template.
    raw_prompt: bool = False


def _data() -> dict:
    return load_template_data("contracts")


# --- tb2lite-json -------------------------------------------------------------------------


def harness_messages(step: Step) -> tuple[Messages, str]:
    """The evaluator's messages (SPEC §2): dicts with a history role and str content; when
    none is left, one user message holding the flattened `prompt`. Fallback: the `prompt`."""
    messages = [
        dict(m)
        for m in step.messages
        if isinstance(m, dict) and m.get("role") in HISTORY_ROLES and isinstance(m.get("content"), str)
    ]
    return (messages or [{"role": "user", "content": step.prompt}]), step.prompt


def legacy_flat_messages(step: Step) -> tuple[Messages, str]:
    """The legacy (386-step, 612f5755) evaluator's prompt (SPEC §2): the whole flattened
    history `prompt` as ONE user message, rendered through the chat template."""
    return [{"role": "user", "content": step.prompt}], step.prompt


def parse_json_action(text: str) -> ParsedAction:
    """The harness parser (SPEC §4), from lab.scoring.parse."""
    from lab.scoring.parse import parse_action

    return parse_action(text)


# --- bash-block ---------------------------------------------------------------------------


def task_text(first_user: str) -> str:
    """The task description inside the dataset's first user message (whole message if unmarked)."""
    spec = _data()["request"]
    start = first_user.find(spec["task_start"])
    if start == -1:
        return first_user.strip()
    body = first_user[start + len(spec["task_start"]) :]
    end = body.find(spec["task_end"])
    return (body if end == -1 else body[:end]).strip()


def initial_screen(first_user: str) -> str:
    """The terminal state shown in the first user message (empty when absent)."""
    marker = _data()["request"]["initial_screen_start"]
    at = first_user.rfind(marker)
    return first_user[at + len(marker) :].strip() if at != -1 else ""


def _tail(text: str) -> str:
    limit = int(_data()["request"]["max_screen_chars"])
    return text if len(text) <= limit else text[-limit:]


def bash_request(step: Step) -> str:
    """`{request}` of the GRPO card: the task text plus the latest terminal output.

    The dataset's first user message holds the JSON-format instructions, the task and the
    initial screen; only the task part is kept (the JSON instructions would contradict the
    contract). The latest screen is the last user/tool message, or the initial screen at
    step 0, cut to its last `max_screen_chars` characters.
    """
    context = split_context(step)
    screen = context.screen or initial_screen(context.task)
    return _data()["request"]["template"].format(task=task_text(context.task), screen=_tail(screen.strip()))


def card_messages(step: Step) -> tuple[Messages, str]:
    """The GRPO card's single prompt, as one user message and as the raw fallback text."""
    prompt = _data()["bash-block"]["prompt"].format(request=bash_request(step))
    return [{"role": "user", "content": prompt}], prompt


def reply_as_bash_block(content: str) -> str:
    """An earlier reference reply in the bash contract's format (verbatim when it has no commands)."""
    parsed = builder_parse_ref(content)
    if not builder_ref_ok(parsed) or not isinstance(parsed.get("commands"), list):
        return content
    from lab.scoring.units import split_command_units

    thinking = " ".join(str(parsed.get(k) or "").strip() for k in ("analysis", "plan")).strip()
    commands = "\n".join(split_command_units(parsed["commands"]))
    return _data()["bash-block-chat"]["assistant"].format(thinking=thinking, commands=commands)


def chat_bash_messages(step: Step) -> tuple[Messages, str]:
    """Mini-swe-agent style: a system instruction, the task (with its initial screen) as the
    first user turn, then the history with earlier replies in the bash-block format."""
    messages, fallback = harness_messages(step)
    first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), None)
    out: Messages = [{"role": "system", "content": _data()["bash-block-chat"]["system"]}]
    for i, m in enumerate(messages):
        if i == first_user:
            task = _data()["request"]["template"].format(
                task=task_text(m["content"]), screen=_tail(initial_screen(m["content"]))
            )
            out.append({"role": "user", "content": task})
        elif m["role"] == "assistant":
            out.append({"role": "assistant", "content": reply_as_bash_block(m["content"])})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out, fallback


def parse_bash_block(text: str, contract: str = "bash-block") -> ParsedAction:
    """`<thinking>…</thinking>` then ONE ```bash block. `valid_json` means the card's format
    regex matched; the first bash block's lines are the command units (empty block: `<WAIT>`)."""
    from lab.scoring.units import WAIT_UNIT, split_keystrokes

    patterns = _data()["bash_parse"]
    body = text.strip()
    thinking_match = re.search(patterns["thinking"], body)
    blocks = re.findall(patterns["block"], body)
    strict = re.match(patterns["strict"], body) is not None and len(blocks) == 1
    thinking = thinking_match.group(1).strip() if thinking_match else None
    units = (split_keystrokes(blocks[0]) or [WAIT_UNIT]) if blocks else []
    if strict:
        failure = None
    elif not blocks:
        failure = "no_bash_block"
    elif not thinking:
        failure = "no_thinking"
    else:
        failure = "extra_text"
    return ParsedAction(
        valid_json=strict,
        has_analysis=bool(thinking),
        has_plan=False,
        task_complete=None,
        command_units=units,
        analysis=thinking,
        plan=None,
        commands=[{"keystrokes": blocks[0]}] if blocks else [],
        failure=failure,
        units_from_fallback=False,
        contract=contract,
    )


def _contract(name: str, build: Callable[[Step], tuple[Messages, str]], parse: Callable[[str], ParsedAction]) -> Contract:
    return Contract(name=name, description=_data()[name]["description"], build_messages=build, parse=parse,
                    raw_prompt=bool(_data()[name].get("raw_prompt", False)))


CONTRACT_PARTS: dict[str, tuple[Callable[[Step], tuple[Messages, str]], Callable[[str], ParsedAction]]] = {
    DEFAULT_CONTRACT: (harness_messages, parse_json_action),
    "legacy-flat": (legacy_flat_messages, parse_json_action),
    "bash-block": (card_messages, lambda text: parse_bash_block(text, "bash-block")),
    "bash-block-chat": (chat_bash_messages, lambda text: parse_bash_block(text, "bash-block-chat")),
}


def contract_names() -> list[str]:
    """Names of every registered contract, the default first."""
    return list(CONTRACT_PARTS)


def get_contract(name: str | None = None) -> Contract:
    """The contract called `name` (default `tb2lite-json`); LabError naming the choices otherwise."""
    from lab.errors import LabError

    name = name or DEFAULT_CONTRACT
    if name not in CONTRACT_PARTS:
        raise LabError(f"unknown output contract {name!r}: choose one of {', '.join(contract_names())}")
    build, parse = CONTRACT_PARTS[name]
    return _contract(name, build, parse)
