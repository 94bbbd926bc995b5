"""Named slices saved in DuckDB, to reopen and share."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from lab.errors import LabError
from lab.triage.db import ensure_triage_schema, query_dicts, write_transaction
from lab.triage.slices import SliceSpec, spec_from_json, spec_to_json

SLICE_NAME = re.compile(r"^[\w .:/+-]{1,80}$")


def save_slice(store: Any, name: str, spec: SliceSpec, author: str = "") -> None:
    """Save (or overwrite) a slice under `name`."""
    name = (name or "").strip()
    if not SLICE_NAME.match(name):
        raise LabError(f"slice name {name!r}: use 1-80 letters, digits, spaces or . : / + - _")
    spec.validate()
    ensure_triage_schema(store)
    with write_transaction(store, "slices") as cur:
        cur.execute("DELETE FROM saved_slices WHERE name = ?", [name])
        cur.execute(
            "INSERT INTO saved_slices (name, spec_json, author, created_at) VALUES (?, ?, ?, ?)",
            [name, spec_to_json(spec), (author or "").strip() or None, datetime.now(timezone.utc).replace(tzinfo=None)],
        )


def load_slice(store: Any, name: str) -> SliceSpec:
    """The slice saved under `name`; LabError if there is none."""
    ensure_triage_schema(store)
    rows = query_dicts(store, "SELECT spec_json FROM saved_slices WHERE name = ?", [name])
    if not rows:
        raise LabError(f"no saved slice named {name!r}; pick one of: {', '.join(list_slices(store)) or '(none yet)'}")
    return spec_from_json(rows[0]["spec_json"])


def list_slices(store: Any) -> list[str]:
    """Names of the saved slices, newest first."""
    ensure_triage_schema(store)
    return [r["name"] for r in query_dicts(store, "SELECT name FROM saved_slices ORDER BY created_at DESC, name")]


def delete_slice(store: Any, name: str) -> None:
    with write_transaction(store, "slices") as cur:
        cur.execute("DELETE FROM saved_slices WHERE name = ?", [name])
