"""Read and write TB2-lite result JSON files (SPEC §8), legacy 386-step or corrected 303-step."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from lab import jsontext
from lab.errors import ResultFileError
from lab.resultfiles.schema import validate_result
from lab.resultfiles.units import coerce_units
from lab.security.safe_files import write_atomic
from lab.tb2lite import CORRECTED as CORRECTED_SCORER, LEGACY as LEGACY_SCORER

CORRECTED = "corrected_303"
LEGACY = "legacy_386"
LEGACY_STEP_COUNT = 386
PREVIEW_CHARS = {CORRECTED: 1200, LEGACY: 500}


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
    return LEGACY_SCORER if scoring_version(result) == LEGACY else CORRECTED_SCORER


def iter_result_files(folder: str | os.PathLike) -> Iterator[Path]:
    """Every `*.json` below `folder`, recursively, in sorted order (SPEC §9 loads sorted)."""
    root = Path(folder)
    if root.is_file():
        yield root
        return
    yield from sorted(p for p in root.rglob("*.json") if p.is_file())


def write_result_file(path: str | os.PathLike, result: dict, *, replace: bool = True) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a file, never through a link
    (lab.security.safe_files.write_atomic). With `replace=False` no existing entry of that name is replaced
    (FileExistsError naming `path`)."""

    def dump(fh) -> None:
        json.dump(result, fh, ensure_ascii=False, indent=1, allow_nan=False)
        fh.write("\n")

    return write_atomic(path, dump, replace=replace)
