"""What visitors of a public lab may write to the shared results store: the kinds of writes the owner opened,
each with its own switch (visitor_writes.yaml). The store refuses every write of a kind not opened (and every
write that names no kind) while it serves visitors."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from lab.settings import Settings, env_flag

KINDS_FILE = Path(__file__).with_name("visitor_writes.yaml")


@dataclass(frozen=True)
class WriteKind:
    """One kind of write a visitor can make: its name, the owner's switch, what it covers."""

    name: str
    switch: str
    what: str
    setting: str | None = None  # a Settings attribute holding the switch's value, read instead of the variable


@lru_cache(maxsize=1)
def write_kinds() -> dict[str, WriteKind]:
    """Every kind of visitor write, from visitor_writes.yaml."""
    raw = yaml.safe_load(KINDS_FILE.read_text(encoding="utf-8"))
    return {name: WriteKind(name, **fields) for name, fields in raw.items()}


def opened_kinds(settings: Settings) -> frozenset[str]:
    """The kinds of writes the owner opened to visitors (their switches on)."""
    opened = set()
    for kind in write_kinds().values():
        on = getattr(settings, kind.setting) if kind.setting else env_flag(kind.switch)
        if on:
            opened.add(kind.name)
    return frozenset(opened)


def refusal(kind: str | None) -> str:
    """The one line refusing a visitor's write of `kind` (None: a write no switch opens)."""
    known = write_kinds().get(kind or "")
    if known is None:
        return "this public deployment does not let visitors write to the results store"
    return (f"this public deployment does not let visitors write {known.what}; the owner can allow it with "
            f"{known.switch}=1")
