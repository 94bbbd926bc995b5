"""Reading replay `.jsonl` lines and checking each record's fields and types."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from lab.errors import ReplayFormatError

# field -> (expected types, description); bool is rejected where an int is expected.
STEP_FIELDS_REQUIRED: dict[str, tuple[tuple[type, ...], str]] = {
    "task_id": ((str,), "a string such as 'task-000'"),
    "step_idx": ((int,), "an integer"),
    "ref_raw": ((str,), "a string (the reference assistant reply)"),
}
STEP_FIELDS_OPTIONAL: dict[str, tuple[tuple[type, ...], str]] = {
    "sample_idx": ((int,), "an integer"),
    "total_steps": ((int,), "an integer"),
    "is_final_step": ((bool,), "true or false"),
    "source": ((str,), "a string"),
    "source_group": ((str,), "a string"),
    "prompt": ((str,), "a string"),
    "messages": ((list,), "a list of {role, content} messages"),
}
CONVERSATION_FIELDS_REQUIRED: dict[str, tuple[tuple[type, ...], str]] = {
    "conversations": ((list,), "a list of {role, content} messages"),
}


@dataclass(frozen=True)
class RawRecord:
    """One decoded JSON object and its 1-based line number."""

    line: int
    data: dict


def iter_jsonl(path: Path, on_error: Callable[[ReplayFormatError], None]) -> Iterator[RawRecord]:
    """Yield the JSON objects of a `.jsonl` file; blank lines are skipped but counted."""
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                on_error(ReplayFormatError(str(path), line_no, None, f"malformed JSON ({exc.msg} at column {exc.colno})"))
                continue
            if not isinstance(data, dict):
                on_error(ReplayFormatError(str(path), line_no, None, f"expected a JSON object, got {type(data).__name__}"))
                continue
            yield RawRecord(line_no, data)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def check_fields(path: str, record: RawRecord, required: dict, optional: dict | None = None) -> list[ReplayFormatError]:
    """Every problem of one record: missing required fields, then wrong types."""
    problems = []
    for name, (types, desc) in required.items():
        if name not in record.data or record.data[name] is None:
            problems.append(ReplayFormatError(path, record.line, name, f"missing required field (expected {desc})"))
        elif not _type_ok(record.data[name], types):
            problems.append(_wrong_type(path, record, name, desc))
    for name, (types, desc) in (optional or {}).items():
        if name in record.data and record.data[name] is not None and not _type_ok(record.data[name], types):
            problems.append(_wrong_type(path, record, name, desc))
    return problems


def check_step_record(path: str, record: RawRecord) -> list[ReplayFormatError]:
    """Problems of a per-step record (current `messages` format or the older per-turn format)."""
    problems = check_fields(path, record, STEP_FIELDS_REQUIRED, STEP_FIELDS_OPTIONAL)
    if not problems and "messages" not in record.data and not isinstance(record.data.get("prompt"), str):
        problems.append(
            ReplayFormatError(path, record.line, "prompt", "missing: a record needs `messages` or a `prompt` string")
        )
    return problems


def _wrong_type(path: str, record: RawRecord, name: str, desc: str) -> ReplayFormatError:
    got = type(record.data[name]).__name__
    return ReplayFormatError(path, record.line, name, f"wrong type: expected {desc}, got {got}")


def record_format(data: dict) -> str:
    """`conversations` (raw source), `messages` (current 303-step set) or `per_turn` (older)."""
    if "conversations" in data:
        return "conversations"
    if "messages" in data:
        return "messages"
    return "per_turn"
