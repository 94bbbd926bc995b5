"""Parse-failure taxonomy: classify each raw answer, and summarize the failures of each run."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from lab.scoring.parse import extract_json, fence_span, parse_action
from lab.scoring.units import split_command_units
from lab.triage.db import query_df

# Primary failure kind of a step, most basic cause first; "ok" when nothing is wrong.
FAILURE_KINDS = (
    "truncated",  # finish_reason == "length": generation hit max_tokens
    "invalid_json",  # no JSON object could be extracted (no braces, bad JSON, not an object)
    "wrong_types",  # analysis/plan not strings, commands not a list of {keystrokes: str, duration: number} …
    "missing_fields",  # one of analysis, plan, commands is absent
    "empty_commands",  # commands is a list that yields no unit
    "prose_around_json",  # valid JSON, but with other text before/after the braces or fence
    "ok",
)
REQUIRED_FIELDS = ("analysis", "plan", "commands")
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


@dataclass
class OutputFailures:
    """Every failure found in one raw answer (several may hold); `kind` is the primary one."""

    kind: str
    invalid_json: bool = False
    prose_around_json: bool = False
    missing_fields: bool = False
    wrong_types: bool = False
    empty_commands: bool = False
    truncated: bool = False
    units_from_fallback: bool = False
    text_complete: bool = True
    commands: list | None = None  # the parsed JSON commands (raw keystrokes), when parseable


def text_outside_json(text: str) -> str:
    """The non-JSON text around the extracted span (fence or first `{` … last `}`), think blocks removed."""
    stripped = text.strip()
    fenced = fence_span(stripped)
    if fenced:
        outside = stripped[: fenced.start] + stripped[fenced.end :]
    else:
        start, end = stripped.find("{"), stripped.rfind("}")
        if start == -1 or end <= start:
            return stripped
        outside = stripped[:start] + stripped[end + 1 :]
    return THINK_BLOCK.sub("", outside).strip()


def leading_prose(text: str) -> str:
    """Text before the JSON (think blocks removed); "" when a think block is still open (cut preview)."""
    head = THINK_BLOCK.sub("", text.strip()).strip()
    if head.startswith("<think>"):
        return ""
    fence, brace = head.find("```"), head.find("{")
    cut = min(i for i in (fence, brace, len(head)) if i != -1)
    return head[:cut].strip()


def _type_problems(payload: dict) -> bool:
    for name in ("analysis", "plan"):
        if name in payload and not isinstance(payload[name], str):
            return True
    if "task_complete" in payload and not isinstance(payload["task_complete"], bool):
        return True
    commands = payload.get("commands")
    if "commands" in payload and not isinstance(commands, list):
        return True
    for command in commands if isinstance(commands, list) else []:
        if not isinstance(command, dict):
            return True
        if "keystrokes" in command and not isinstance(command["keystrokes"], str):
            return True
        duration = command.get("duration")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
            return True
    return False


def classify_output(
    text: str | None,
    finish_reason: str | None = None,
    *,
    text_complete: bool = True,
    stored_valid_json: bool | None = None,
    stored_pred_units: int | None = None,
) -> OutputFailures:
    """Classify one raw answer.

    When only a storage-truncated preview is known (`text_complete=False`: published result
    files keep 1,200 or 500 characters), the stored `valid_json` and unit count decide
    validity and fallback use, and only the leading part of the preview is checked for prose.
    """
    text = text or ""
    truncated = finish_reason == "length"
    if not text_complete:
        valid = bool(stored_valid_json)
        prose = valid and bool(leading_prose(text))
        from_fallback = (not valid) and bool(stored_pred_units)
        kind = "truncated" if truncated else "invalid_json" if not valid else "prose_around_json" if prose else "ok"
        return OutputFailures(kind, invalid_json=not valid, prose_around_json=prose, truncated=truncated,
                              units_from_fallback=from_fallback, text_complete=False)

    parsed = parse_action(text)
    payload = extract_json(text) if parsed.valid_json else None
    out = OutputFailures("ok", truncated=truncated, units_from_fallback=parsed.units_from_fallback)
    out.invalid_json = not parsed.valid_json
    if isinstance(payload, dict):
        commands = payload.get("commands")
        out.commands = commands if isinstance(commands, list) else None
        out.missing_fields = any(name not in payload for name in REQUIRED_FIELDS)
        out.wrong_types = _type_problems(payload)
        out.empty_commands = isinstance(commands, list) and not split_command_units(commands)
        out.prose_around_json = bool(text_outside_json(text))
    for kind in FAILURE_KINDS[:-1]:
        if getattr(out, kind):
            out.kind = kind
            break
    return out


# Per-run summary: counts of each failure, and the F1 with strict parsing vs with the fallback.
_SUMMARY_SQL = """
SELECT s.run_id, any_value(r.display_name) AS run,
       count(*) AS steps,
       count(*) FILTER (WHERE f.invalid_json) AS invalid_json,
       count(*) FILTER (WHERE f.prose_around_json) AS prose_around_json,
       count(*) FILTER (WHERE f.missing_fields) AS missing_fields,
       count(*) FILTER (WHERE f.wrong_types) AS wrong_types,
       count(*) FILTER (WHERE f.empty_commands) AS empty_commands,
       count(*) FILTER (WHERE f.truncated) AS truncated_length,
       count(*) FILTER (WHERE f.units_from_fallback) AS units_from_fallback,
       round(avg(f.strict_f1), 4) AS strict_f1,
       round(avg(s.command_f1), 4) AS fallback_f1,
       round(avg(s.command_f1) - avg(f.strict_f1), 4) AS fallback_gain
FROM steps s JOIN step_flags f ON f.run_id = s.run_id AND f.step_key = s.step_key
JOIN runs r ON r.run_id = s.run_id
{where}
GROUP BY s.run_id
ORDER BY run, s.run_id
"""


def run_taxonomy(store: Any, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per run: failure counts, strict-parsing F1, fallback (published) F1 and the gain.

    F1 values are means of the stored 4-decimal per-step values, rounded to 4 (SPEC §7).
    """
    if run_ids:
        return query_df(store, _SUMMARY_SQL.format(where="WHERE list_contains(?, s.run_id)"), [list(run_ids)])
    return query_df(store, _SUMMARY_SQL.format(where=""))
