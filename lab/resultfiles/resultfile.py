"""Read and write TB2-lite result JSON files (SPEC §8), legacy 386-step or corrected 303-step."""
from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Iterator

from lab import jsontext
from lab.errors import ResultFileError

CORRECTED = "corrected_303"
LEGACY = "legacy_386"
LEGACY_STEP_COUNT = 386
PREVIEW_CHARS = {CORRECTED: 1200, LEGACY: 500}


_STRING = r"'(?:[^'\\\r\n]|\\[^\r\n])*'" + "|" + r'"(?:[^"\\\r\n]|\\[^\r\n])*"'
STRING_LITERAL = re.compile(_STRING)
# the Python repr of a list (or tuple) of strings, e.g. `['ls -la', "cat 'a b'"]`; nothing else
UNITS_REPR = re.compile(rf"\[\s*(?:(?:{_STRING})\s*,\s*)*(?:(?:{_STRING})\s*)?\]|\(\s*(?:(?:{_STRING})\s*,\s*)*(?:(?:{_STRING})\s*)?\)")
MAX_UNITS_TEXT = 8 * 2**20  # characters of one stored unit string; larger means a broken file


def _decode_literal(literal: str) -> str:
    """One Python string literal's value (escapes as Python reads them), without evaluating code."""
    body = literal[1:-1]
    if "\\" not in body:
        return body
    # unicode_escape reads Latin-1 bytes: escape everything beyond Latin-1 first so it round-trips
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


def coerce_units(value: object) -> list[str]:
    """Return stored command units as a list of strings.

    Some stored rows keep the units as the Python repr of a list (`"['ls', 'pwd']"`); those are
    decoded by a small grammar (a list or tuple of quoted strings), never by evaluating the text,
    so a recursive or huge string cannot exhaust the stack or memory. Any other string is one unit.
    None becomes [].
    """
    if value is None:
        return []
    if isinstance(value, str):
        if len(value) > MAX_UNITS_TEXT:
            raise ValueError(f"command units string is {len(value):,} characters (limit {MAX_UNITS_TEXT:,})")
        text = value.strip()
        if not text:
            return []
        if UNITS_REPR.fullmatch(text):
            try:
                return [_decode_literal(m.group(0)) for m in STRING_LITERAL.finditer(text)]
            except UnicodeDecodeError:
                pass  # an escape Python would not accept: keep the text as one unit
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(u) for u in value]
    raise ValueError(f"command units must be a list, got {type(value).__name__}")


def read_result_file(path: str | os.PathLike) -> dict:
    """Load and validate a result file; raise ResultFileError naming the file, row and field."""
    p = Path(path)
    if not p.exists():
        raise ResultFileError(f"{p}: no such result file")
    if not p.is_file():
        raise ResultFileError(f"{p}: not a regular file (give a result .json file)")
    try:
        content = p.read_bytes()
    except OSError as exc:
        raise ResultFileError(f"{p}: cannot read: {exc.strerror or exc}") from None
    data = parse_result_bytes(content, str(p))
    return data


def parse_result_bytes(content: bytes, name: str) -> dict:
    """Decode (UTF-8, optional BOM) and validate the bytes of a result file."""
    try:
        data = jsontext.loads(content)
    except jsontext.JsonTextError as exc:
        raise ResultFileError(f"{name}: {exc}") from None
    check_result(data, name)
    return data  # type: ignore[return-value]


def check_result(data: object, name: str = "result") -> None:
    """Validate a result dict with the one validator (lab.resultfiles.schema)."""
    from lab.resultfiles.schema import validate_result

    validate_result(data, name)


def scoring_version(result: dict) -> str:
    """`corrected_303` or `legacy_386` for a result dict.

    An explicit `scoring_version` wins (the lab writes one). Otherwise a 386-step file, or one
    with an empty reference unit list (the corrected set never has those), is legacy.
    """
    explicit = result.get("scoring_version")
    if explicit in (CORRECTED, LEGACY):
        return explicit
    per_step = result.get("per_step") or []
    if len(per_step) == LEGACY_STEP_COUNT:
        return LEGACY
    if any(not coerce_units(r.get("ref_command_units")) for r in per_step):
        return LEGACY
    return CORRECTED


def scorer_for(result: dict) -> str:
    """The scorer name (`corrected`/`legacy`) matching a result's scoring version."""
    return "legacy" if scoring_version(result) == LEGACY else "corrected"


def iter_result_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Every `*.json` below `folder`, recursively, in sorted order (SPEC §9 loads sorted)."""
    root = Path(folder)
    if root.is_file():
        yield root
        return
    yield from sorted(p for p in root.rglob("*.json") if p.is_file())


def write_result_file(path: str | os.PathLike, result: dict) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a file.

    The temp file is created with mode 0666 less the user's umask (0644 usually), like any file the
    user writes, so the renamed result is readable by the group/others the umask allows.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.parent / f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(result, fh, ensure_ascii=False, indent=1, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p
