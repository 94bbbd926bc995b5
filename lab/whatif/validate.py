"""Size caps on what-if edits (limits.yaml): a visitor cannot make the lab render megabytes."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lab.settings import read_limits
from lab.whatif.edit import FIELD_KINDS, EditError, FieldEdit, WhatIf

LIMITS_PATH = Path(__file__).with_name("limits.yaml")
LIMITS_ENV = "LAB_WHATIF_LIMITS"  # the owner's own caps: a file with the keys of limits.yaml


@lru_cache(maxsize=1)
def limits() -> dict[str, int]:
    """The caps of limits.yaml."""
    return {k: int(v) for k, v in read_limits(LIMITS_PATH, LIMITS_ENV, "the what-if caps").items()}


def check_edit(edit: FieldEdit) -> None:
    """EditError naming the field and the cap when one edit is unknown or too large."""
    if edit.kind not in FIELD_KINDS:
        raise EditError(f"what-if field '{edit.field}' is unknown: use one of task, screen, system, turn:N")
    edit.turn  # noqa: B018 - raises for a malformed turn:N
    cap = limits()
    if len(edit.new) > cap["max_field_chars"]:
        raise EditError(f"what-if field '{edit.field}': {len(edit.new):,} characters is over the cap of "
                        f"{cap['max_field_chars']:,}; shorten the text")
    if len(edit.new) - len(edit.old) > cap["max_added_chars"]:
        raise EditError(f"what-if field '{edit.field}': the edit adds {len(edit.new) - len(edit.old):,} characters, "
                        f"over the cap of {cap['max_added_chars']:,}; add less text")


def check_whatif(whatif: WhatIf) -> None:
    """Check every edit, their count and the note; an edit that changes nothing is refused."""
    cap = limits()
    if not whatif.edits:
        raise EditError("a what-if needs at least one edit")
    if len(whatif.edits) > cap["max_edits_per_whatif"]:
        raise EditError(f"a what-if holds at most {cap['max_edits_per_whatif']} field edits, not {len(whatif.edits)}")
    if len(whatif.note) > cap["max_note_chars"]:
        raise EditError(f"the what-if note is over {cap['max_note_chars']} characters; shorten it")
    for edit in whatif.edits:
        check_edit(edit)
    if all(e.old == e.new for e in whatif.edits):
        raise EditError(f"the edit of {', '.join(whatif.fields)} changes nothing: change the text first")
