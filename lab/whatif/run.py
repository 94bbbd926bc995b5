"""Run a what-if on one engine: render the original and the edited step, generate, score.

The result is a WhatIfResult, never a per_step row of a run: it goes to the what-if tables only.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.prompts.engine_prompt import render_for_engine
from lab.runs.pipeline import StepResult, run_steps
from lab.whatif.apply import apply_whatif
from lab.whatif.diff import unified_diff
from lab.whatif.edit import WhatIf
from lab.whatif.validate import check_whatif


@dataclass
class WhatIfResult:
    """One engine's answer to an edited step (units, metrics, raw output, the prompt patch)."""

    edit_id: str
    step_key: str
    engine_spec: str
    engine_name: str
    engine_kind: str
    model_id: str
    patch: str  # unified diff of the engine's rendered prompt: original -> edited
    prompt_status: str | None
    prompt_tokens: int | None
    raw_output: str
    pred_units: list[str]
    ref_units: list[str]
    metrics: dict[str, float]
    valid_json: bool | None
    latency_s: float | None
    error: str | None
    answers_from_data: bool  # reference/stored engines: the edit cannot change their answer
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc).replace(tzinfo=None))
    original_prompt: str = field(default="", repr=False)  # kept in memory for the page, not stored
    edited_prompt: str = field(default="", repr=False)

    @property
    def f1(self) -> float | None:
        return self.metrics.get("command_f1")

    def record(self) -> dict[str, Any]:
        """The stored/exported form (JSON-safe; the full prompts are left out, the patch stays)."""
        data = asdict(self)
        data.pop("original_prompt")
        data.pop("edited_prompt")
        data["created_at"] = self.created_at.isoformat(timespec="seconds")
        return data


def run_whatif(engine: EngineBase, step: Step, whatif: WhatIf, spec: str = "", name: str = "",
               kind: str = "") -> WhatIfResult:
    """Apply `whatif` to `step` and answer it with `engine`; an engine failure is kept in `error`."""
    check_whatif(whatif)
    edited = apply_whatif(step, whatif)
    kind = kind or engine.kind
    original_prompt = render_for_engine(engine, step)
    edited_prompt = render_for_engine(engine, edited)
    try:
        result: StepResult | None = run_steps(engine, [edited], prompts=[edited_prompt])[0]
        error = result.engine_error
    except Exception as exc:  # noqa: BLE001 - one engine's failure is recorded, the others go on
        result, error = None, f"{type(exc).__name__}: {exc}"
    row = result.per_step if result is not None else {}
    return WhatIfResult(
        edit_id=whatif.edit_id,
        step_key=step.key,
        engine_spec=spec or engine.spec or name,
        engine_name=name or engine.name or spec,
        engine_kind=kind,
        model_id=engine.model_id or "",
        patch=unified_diff(original_prompt.text, edited_prompt.text),
        prompt_status=edited_prompt.status,
        prompt_tokens=row.get("prompt_tokens", edited_prompt.n_tokens),
        raw_output=row.get("raw_output", ""),
        pred_units=list(row.get("pred_command_units", [])),
        ref_units=list(row.get("ref_command_units", [])),
        metrics={k: float(row[k]) for k in ("first_cmd_exact", "command_precision", "command_recall", "command_f1")
                 if k in row},
        valid_json=row.get("valid_json"),
        latency_s=row.get("latency_s"),
        error=error,
        answers_from_data=engine.answers_from_data,
        original_prompt=original_prompt.text,
        edited_prompt=edited_prompt.text,
    )


def result_from_record(data: dict) -> WhatIfResult:
    """A WhatIfResult from `record()`'s shape (e.g. a row of the store)."""
    values = dict(data)
    for key in ("pred_units", "ref_units", "metrics"):
        if isinstance(values.get(key), str):
            values[key] = json.loads(values[key])
    created = values.get("created_at")
    if isinstance(created, str):
        values["created_at"] = datetime.fromisoformat(created)
    known = set(WhatIfResult.__dataclass_fields__)
    return WhatIfResult(**{k: v for k, v in values.items() if k in known})
