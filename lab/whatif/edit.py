"""The what-if edit model: which part of a step's context is replaced, and by what.

A step's context has four editable kinds of field (as Compare shows them, lab.data.context):
`task` (the first user message), `turn:N` (the N-th earlier turn), `screen` (the latest
terminal screen; at the first step the initial screen inside the task message) and `system`
(the system message, added when the step has none).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from lab.errors import LabError

FIELD_KINDS = ("task", "turn", "screen", "system")


class EditError(LabError):
    """An edit that cannot be made (unknown field, stale old text, over a size cap)."""


@dataclass(frozen=True)
class FieldEdit:
    """Replace the text of one field: `field` is `task`, `screen`, `system` or `turn:N`."""

    field: str
    old: str
    new: str

    @property
    def kind(self) -> str:
        return self.field.split(":", 1)[0]

    @property
    def turn(self) -> int | None:
        """N of `turn:N` (None for the other fields)."""
        if self.kind != "turn":
            return None
        try:
            return int(self.field.split(":", 1)[1])
        except (IndexError, ValueError):
            raise EditError(f"what-if field '{self.field}': write turn:N with N a number (e.g. turn:0)") from None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class WhatIf:
    """A named set of field edits to one step (`step_key` like `task-000/3`)."""

    step_key: str
    edits: tuple[FieldEdit, ...]
    note: str = ""
    created_by: str = field(default="", compare=False)

    @property
    def edit_id(self) -> str:
        """Stable id: a hash of the step key and the edits (the same edit saved twice is one edit)."""
        body = json.dumps([self.step_key, [e.to_dict() for e in self.edits]], sort_keys=True)
        return "wi-" + hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]

    @property
    def fields(self) -> list[str]:
        return [e.field for e in self.edits]

    def to_dict(self) -> dict:
        return {"edit_id": self.edit_id, "step_key": self.step_key, "note": self.note,
                "created_by": self.created_by, "edits": [e.to_dict() for e in self.edits]}

    @classmethod
    def from_dict(cls, data: dict) -> "WhatIf":
        """Build from `to_dict()`'s shape (EditError naming what is missing)."""
        try:
            edits = tuple(FieldEdit(str(e["field"]), str(e["old"]), str(e["new"])) for e in data["edits"])
            return cls(str(data["step_key"]), edits, str(data.get("note") or ""), str(data.get("created_by") or ""))
        except (KeyError, TypeError) as exc:
            raise EditError(f"not a what-if edit (missing {exc}): expected step_key and edits[field, old, new]") from None
