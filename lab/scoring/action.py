"""The parsed form of one model answer (SPEC §4), shared by every output contract."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lab.tb2lite import DEFAULT_CONTRACT


@dataclass
class ParsedAction:
    """Result of parsing a raw completion.

    The first five fields are the harness's parse result; the rest explain it for triage.
    `failure` names why strict parsing failed (None when the JSON parsed); `units_from_fallback`
    is True when the command units came only from the `"keystrokes"` regex fallback.
    """

    valid_json: bool
    has_analysis: bool
    has_plan: bool
    task_complete: bool | None
    command_units: list[str]
    analysis: str | None = None
    plan: str | None = None
    commands: list = field(default_factory=list)
    failure: str | None = None
    units_from_fallback: bool = False
    contract: str = DEFAULT_CONTRACT

    def to_dict(self) -> dict:
        return asdict(self)
