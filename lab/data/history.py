"""Builder rules shared by every record format (SPEC §1–§2): message normalization,
the builder's reference JSON extraction and the flattened `prompt` string."""
from __future__ import annotations

import json
from typing import Any, Iterable

HISTORY_ROLES = ("system", "user", "assistant", "tool")


def normalize_message(message: Any) -> dict | None:
    """Keep `{role, content}` when role is system/user/assistant/tool and content is a str."""
    if not isinstance(message, dict):
        return None
    role, content = message.get("role"), message.get("content")
    if role not in HISTORY_ROLES or not isinstance(content, str):
        return None
    return {"role": role, "content": content}


def normalize_messages(messages: Iterable[Any]) -> list[dict]:
    """Normalize a list of messages, silently dropping the ones SPEC §1 drops."""
    return [m for m in (normalize_message(x) for x in messages) if m is not None]


def builder_parse_ref(text: str) -> Any:
    """The builder's JSON extraction (SPEC §1): strip, slice first `{` to last `}`, json.loads.

    Fences are ignored. Returns the parsed value or None on failure.
    """
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start != -1 and end != -1 and end > start:
        body = body[start : end + 1]
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def builder_ref_ok(parsed: Any) -> bool:
    """`ref_parse_ok`: the builder got a non-empty object (`{}` is not ok)."""
    return isinstance(parsed, dict) and bool(parsed)


def builder_commands(parsed: Any) -> list:
    """The ref's raw `commands` if it is a list, else `[]`."""
    if not isinstance(parsed, dict):
        return []
    commands = parsed.get("commands")
    return commands if isinstance(commands, list) else []


def builder_units(parsed: Any) -> list[str]:
    """The builder's flattening of the ref `commands` into command units (SPEC §5).

    Each command dict gives its stripped, non-empty keystroke lines, or `<WAIT>` when none;
    non-dict entries give nothing (the harness's builder would crash on them).
    """
    units: list[str] = []
    for command in builder_commands(parsed):
        if not isinstance(command, dict):
            continue
        pieces = [p.strip() for p in _newlines(str(command.get("keystrokes", ""))).split("\n")]
        pieces = [p for p in pieces if p]
        units.extend(pieces or ["<WAIT>"])
    return units


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def ref_is_scored(ref_raw: str, include_invalid_refs: bool = False, include_empty_command_refs: bool = False) -> bool:
    """Whether the corrected builder emits a step for this reference reply."""
    parsed = builder_parse_ref(ref_raw)
    if not builder_ref_ok(parsed):
        return include_invalid_refs
    if not builder_units(parsed):
        return include_empty_command_refs
    return True


def flatten_history(messages: Iterable[dict]) -> str:
    """SPEC §1 `prompt`: `ROLE_UPPER + ":\\n" + content` per message, joined by a blank line."""
    return "\n\n".join(f"{str(m.get('role', '')).upper()}:\n{m.get('content', '')}" for m in messages)


def source_group_of(source: str) -> str:
    """Last `/`-separated segment of the source path, `unknown` when empty."""
    return source.split("/")[-1] if source else "unknown"
