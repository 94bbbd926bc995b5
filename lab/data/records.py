"""Reading replay `.jsonl` lines and checking each record's fields and types."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from lab import jsontext
from lab.data.step import MAX_STEP_IDX
from lab.errors import LabError, ReplayFormatError

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
# integer fields that must lie in 0..MAX_STEP_IDX (what a result file and the store accept)
INDEX_FIELDS = ("step_idx", "sample_idx", "total_steps")
CONVERSATION_FIELDS_REQUIRED: dict[str, tuple[tuple[type, ...], str]] = {
    "conversations": ((list,), "a list of {role, content} messages"),
}


@dataclass(frozen=True)
class RawRecord:
    """One decoded JSON object and its 1-based line number."""

    line: int
    data: dict


def read_replay_bytes(path: Path) -> bytes:
    """The bytes of a replay file; LabError (naming it) for a folder, FIFO, device or unreadable file."""
    if not path.is_file():
        what = "no such file" if not path.exists() else "not a regular file (a folder, FIFO or device)"
        raise LabError(f"replay file {path}: {what}; pass --replay PATH to a .jsonl file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise LabError(f"replay file {path}: cannot read it: {exc.strerror or exc}") from None


def decode_line(raw: bytes, line_no: int) -> object:
    """One line's JSON value; JsonTextError says what is wrong (bad UTF-8, bad JSON, nested too deep)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise jsontext.JsonTextError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None
    if line_no == 1 and text.startswith(jsontext.BOM):
        text = text[1:]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise jsontext.JsonTextError(f"malformed JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise jsontext.JsonTextError(f"JSON nested deeper than {jsontext.MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer literal past Python's digit limit (4300 digits)
        raise jsontext.JsonTextError(jsontext.too_long_number(exc)) from None
    jsontext.check_decoded(text, data)
    return data


def iter_jsonl(path: Path, on_error: Callable[[ReplayFormatError], None], hasher=None) -> Iterator[RawRecord]:
    """Yield the JSON objects of a `.jsonl` file; blank lines are skipped but counted.

    Every line problem (bad UTF-8, malformed JSON, nesting deeper than `jsontext.MAX_DEPTH`, not an
    object) goes to `on_error` with its 1-based line number. `hasher` (e.g. hashlib.sha256()) is fed
    the file's exact bytes: the replay source's fingerprint.
    """
    content = read_replay_bytes(Path(path))
    if hasher is not None:
        hasher.update(content)
    for line_no, raw in enumerate(content.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = decode_line(raw, line_no)
        except jsontext.JsonTextError as exc:
            on_error(ReplayFormatError(str(path), line_no, None, str(exc)))
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
    for name in INDEX_FIELDS:
        value = record.data.get(name)
        if _type_ok(value, (int,)) and not 0 <= value <= MAX_STEP_IDX:
            problems.append(ReplayFormatError(path, record.line, name, f"out of range: {value} (expected 0 to {MAX_STEP_IDX})"))
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
    if data.get("messages") is not None:
        return "messages"
    return "per_turn"
