"""Read and write TB2-lite result JSON files (SPEC §8), legacy 386-step or corrected 303-step."""
from __future__ import annotations

import ast
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

from lab.errors import ResultFileError

CORRECTED = "corrected_303"
LEGACY = "legacy_386"
LEGACY_STEP_COUNT = 386
PREVIEW_CHARS = {CORRECTED: 1200, LEGACY: 500}


def coerce_units(value: object) -> list[str]:
    """Return stored command units as a list of strings.

    Some stored rows keep the units as the Python repr of a list (`"['ls', 'pwd']"`);
    those are decoded with `ast.literal_eval`. None becomes [].
    """
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [value]
    if isinstance(value, (list, tuple)):
        return [str(u) for u in value]
    raise ValueError(f"command units must be a list, got {type(value).__name__}")


def read_result_file(path: str | os.PathLike) -> dict:
    """Load and check a result file; raise ResultFileError naming the file and the problem."""
    p = Path(path)
    if not p.is_file():
        raise ResultFileError(f"{p}: no such result file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ResultFileError(f"{p}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ResultFileError(f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    check_result(data, str(p))
    return data


def check_result(data: object, name: str = "result") -> None:
    """Validate the parts of the schema the lab relies on."""
    if not isinstance(data, dict):
        raise ResultFileError(f"{name}: top level must be a JSON object, got {type(data).__name__}")
    per_step = data.get("per_step")
    if not isinstance(per_step, list):
        raise ResultFileError(f"{name}: missing 'per_step' list; is this a TB2-lite result file?")
    for i, row in enumerate(per_step):
        if not isinstance(row, dict):
            raise ResultFileError(f"{name}: per_step[{i}] is not an object")
        for key in ("task_id", "step_idx"):
            if key not in row:
                raise ResultFileError(f"{name}: per_step[{i}] has no '{key}'")
        for key in ("ref_command_units", "pred_command_units"):
            try:
                coerce_units(row.get(key))
            except ValueError as exc:
                raise ResultFileError(f"{name}: per_step[{i}] field '{key}': {exc}") from None
    if "aggregate" in data and not isinstance(data["aggregate"], dict):
        raise ResultFileError(f"{name}: 'aggregate' must be an object")


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
    """Write atomically (temp file + rename) so a crash never leaves half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=p.name, suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(result, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
