"""Command-unit splitting (SPEC §5): turn a `commands` list into the scored units."""
from __future__ import annotations

from typing import Iterable

WAIT_UNIT = "<WAIT>"


def split_keystrokes(keystrokes: str) -> list[str]:
    """Split one keystroke string on real line breaks (CRLF, CR, LF); strip and drop empties.

    An escaped `\\n` (backslash + n) inside the text is not a line break and is kept.
    """
    text = keystrokes.replace("\r\n", "\n").replace("\r", "\n")
    return [piece.strip() for piece in text.split("\n") if piece.strip()]


def split_command_units(commands: Iterable[object]) -> list[str]:
    """Flatten a harness `commands` list into command units, in order.

    Rules (SPEC §5): only dict entries count (other entries are dropped silently, as the
    evaluator does); a missing `keystrokes` is ""; the value goes through `str()`; each
    non-empty stripped line is one unit (so a heredoc gives one unit per body line and
    `&&`/`;`/`|` chains stay one unit); a command with no line left gives `<WAIT>`.
    """
    units: list[str] = []
    for command in commands:
        if not isinstance(command, dict):
            continue
        # Deliberate decision (SPEC §10.9): `"keystrokes": null` goes through str() like any
        # other value and becomes the unit "None". That is the harness's bug, kept on purpose:
        # the published results were scored this way and the lab must reproduce them exactly.
        pieces = split_keystrokes(str(command.get("keystrokes", "")))
        units.extend(pieces if pieces else [WAIT_UNIT])
    return units
