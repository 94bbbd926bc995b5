"""Parse a raw model answer (or a reference reply) the way the harness does (SPEC §4)."""
from __future__ import annotations

import codecs
import json
import re
from typing import NamedTuple

from lab.scoring.action import ParsedAction
from lab.scoring.units import split_command_units

# The harness's fence regex, r"```(?:json)?\s*(\{.*\})\s*```" with DOTALL, is greedy: with several
# fenced blocks the span runs from the first `{` after the first opening fence to the last `}` before
# a closing fence. Run as a regex it backtracks quadratically (256 KB of "```{" took seconds), so the
# same span is found in two linear scans: the first opening fence from the left, the last closing
# fence from the right (searched in the reversed text).
FENCE_OPEN = re.compile(r"```(?:json)?\s*\{")
FENCE_CLOSE_REVERSED = re.compile(r"```\s*\}")
KEYSTROKES_FIELD = re.compile(r'"keystrokes"\s*:\s*"((?:[^"\\]|\\.)*)"')
LINE_BREAK = re.compile(r"\r\n|\r|\n")

# ParsedAction.failure values (None when the JSON parsed to an object).
NO_JSON = "no_json"  # the text has no `{ … }` span at all
INVALID_JSON = "invalid_json"  # there is a brace span but json.loads rejects it
NOT_AN_OBJECT = "not_an_object"  # it parses, but to a list/number/bool/string/null


class FenceSpan(NamedTuple):
    """Where the harness's fence regex matches: the whole match `[start, end)` and its `{…}` group."""

    start: int
    end: int
    json_start: int
    json_end: int


def fence_span(text: str) -> FenceSpan | None:
    """The match of the harness's fence regex in `text` (SPEC §4 step 2), or None; linear time."""
    opening = FENCE_OPEN.search(text)
    if opening is None:
        return None
    closing = FENCE_CLOSE_REVERSED.search(text[::-1])
    if closing is None:
        return None
    brace, close_brace = opening.end() - 1, len(text) - closing.end()  # the `{` and the `}`
    if close_brace <= brace:
        return None
    return FenceSpan(opening.start(), len(text) - closing.start(), brace, close_brace + 1)


def fenced_json(text: str) -> str | None:
    """The `{…}` the harness's fence regex captures, or None."""
    span = fence_span(text)
    return None if span is None else text[span.json_start : span.json_end]


def json_span(text: str) -> str:
    """The text the harness hands to json.loads: fenced `{…}`, else first `{` to last `}`."""
    stripped = text.strip()
    fenced = fenced_json(stripped)
    if fenced is not None:
        return fenced
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end != -1 and end > start:
        return stripped[start : end + 1]
    return stripped


_FAILED = object()


def _load(text: str) -> object:
    try:
        return json.loads(json_span(text))
    except Exception:  # the harness treats every exception as "no payload"
        return _FAILED


def extract_json(text: str) -> object | None:
    """SPEC §4 extraction: the parsed payload, or None on any failure. Any JSON type may come back."""
    payload = _load(text)
    return None if payload is _FAILED else payload


def fallback_units(text: str) -> list[str]:
    """Recover units from every `"keystrokes": "…"` string in the raw text (no `<WAIT>` here).

    Each match is decoded with the `unicode_escape` codec (this mangles non-ASCII text, as the
    harness does: SPEC §10.7); when decoding fails the raw match is used.
    """
    units: list[str] = []
    for match in KEYSTROKES_FIELD.findall(text):
        try:
            decoded = codecs.decode(match, "unicode_escape")
        except Exception:
            decoded = match
        units.extend(piece.strip() for piece in LINE_BREAK.split(decoded) if piece.strip())
    return units


def _failure_kind(text: str, payload: object) -> str | None:
    if isinstance(payload, dict):
        return None
    if payload is not _FAILED:  # parsed, to a list, number, bool, string or null
        return NOT_AN_OBJECT
    stripped = text.strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    has_braces = start != -1 and end > start
    return INVALID_JSON if has_braces else NO_JSON


def parse_action(text: str) -> ParsedAction:
    """Parse one raw answer into a ParsedAction (harness fields plus triage detail).

    Deliberate decision (SPEC §10.8): when the extracted span parses to something that is not
    an object (`42`, `[1]`, `true`, `"x"`, `null`), the harness crashes calling `.get` on it.
    The lab treats such output as invalid JSON instead (`valid_json=False`,
    `failure="not_an_object"`) and runs the keystrokes fallback, so one odd answer never stops
    a replay and it counts as a parse failure, which is what it is for the task.
    """
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    payload = _load(text)
    failure = _failure_kind(text, payload)
    action = ParsedAction(
        valid_json=failure is None,
        has_analysis=False,
        has_plan=False,
        task_complete=None,
        command_units=[],
        failure=failure,
    )
    if failure is None:
        assert isinstance(payload, dict)
        commands = payload.get("commands")
        action.commands = commands if isinstance(commands, list) else []
        action.command_units = split_command_units(action.commands)
        complete = payload.get("task_complete")
        action.task_complete = complete if isinstance(complete, bool) else None
        action.analysis = _as_text(payload.get("analysis"))
        action.plan = _as_text(payload.get("plan"))
        action.has_analysis = bool(payload.get("analysis"))
        action.has_plan = bool(payload.get("plan"))
    if not action.command_units:
        # SPEC §4: the fallback runs whenever no unit came out, valid JSON included.
        action.command_units = fallback_units(text)
        action.units_from_fallback = bool(action.command_units)
    return action


def _as_text(value: object) -> str | None:
    """analysis/plan as shown in the UI: strings as is, other JSON values serialized."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
