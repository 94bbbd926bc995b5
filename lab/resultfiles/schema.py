"""The one validator of TB2-lite result files (SPEC §8), shared by rescore, `stored:`, the store import and resume.

Pydantic models of the published schema check the fields the lab reads; unknown fields are kept.
Every problem is reported as `FILE: per_step[I] (TASK/STEP) field 'NAME': what is wrong`. Non-finite
numbers anywhere in the file, an out-of-range `step_idx` and duplicate `(task_id, step_idx)` rows are
errors, so nothing the store would reject (or NaN) ever gets past this point.

Every number the lab reads is strict: a boolean or a string is not a number (`true` is not 1.0, `"0.5"`
is not 0.5), a per-step metric lies in 0–1, and a step's sampled answers (`samples[j]`) are checked
by the same rules and capped at `max_samples_per_step` (limits.yaml).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Iterable, Optional

import yaml

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, ValidationError

from lab.data.step import MAX_STEP_IDX
from lab.errors import ResultFileError
from lab.jsontext import Loc, format_loc, non_finite, one_line
from lab.resultfiles.units import coerce_units

MAX_COUNT = 2**31 - 1
MAX_PROBLEMS_SHOWN = 3
LIMITS_PATH = Path(__file__).with_name("limits.yaml")


@lru_cache(maxsize=1)
def max_samples_per_step() -> int:
    """The most sampled answers one step may hold (limits.yaml)."""
    return int(yaml.safe_load(LIMITS_PATH.read_text(encoding="utf-8"))["max_samples_per_step"])


def _scalar_text(value: Any) -> Any:
    """Scalars become text (vLLM's `stop_reason` may be a token id); containers stay and are refused."""
    if isinstance(value, (bool, int, float)):
        return str(value)
    return value


def _units(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return coerce_units(value)
    return value


Text = Annotated[str, BeforeValidator(_scalar_text)]
# strict: an int is a number, a boolean or a string is not
Finite = Annotated[float, Field(strict=True, allow_inf_nan=False)]
Fraction = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=1)]  # a per-step metric: 0 to 1
Percent = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=100)]
NonNegative = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
Seconds = NonNegative
Index = Annotated[int, Field(strict=True, ge=0, le=MAX_STEP_IDX)]
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_COUNT)]
Seed = Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)]  # the store keeps it as a BIGINT
Units = Annotated[list[Annotated[str, Field(strict=True)]], BeforeValidator(_units)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class SampleRow(_Open):
    """One sampled answer of a step (`per_step[i].samples[j]`, lab.runs.samples): the same types and ranges
    as the step's own fields."""

    sample: Optional[Count] = None
    seed: Optional[Seed] = None
    raw_output: Optional[Text] = None
    pred_command_units: Optional[Units] = None
    valid_json: Optional[StrictBool] = None
    pred_task_complete: Optional[StrictBool] = None
    first_cmd_exact: Optional[Fraction] = None
    command_precision: Optional[Fraction] = None
    command_recall: Optional[Fraction] = None
    command_f1: Optional[Fraction] = None
    finish_reason: Optional[Text] = None
    completion_tokens: Optional[Count] = None
    latency_s: Optional[Seconds] = None
    parse_failure: Optional[Text] = None
    error: Optional[Text] = None


class StepRow(_Open):
    """One `per_step` entry: the keys and types the lab reads (SPEC §8 plus the lab's extras)."""

    task_id: Annotated[str, Field(strict=True, min_length=1, max_length=200)]
    step_idx: Index
    sample_idx: Optional[Count] = None
    source_group: Optional[Text] = None
    bucket: Optional[Text] = None
    valid_json: Optional[StrictBool] = None
    has_analysis: Optional[StrictBool] = None
    has_plan: Optional[StrictBool] = None
    ref_task_complete: Optional[StrictBool] = None
    pred_task_complete: Optional[StrictBool] = None
    pred_task_complete_true: Optional[StrictBool] = None
    ref_command_units: Units = []
    pred_command_units: Optional[Units] = None
    first_cmd_exact: Optional[Fraction] = None
    command_precision: Optional[Fraction] = None
    command_recall: Optional[Fraction] = None
    command_f1: Optional[Fraction] = None
    pred_preview: Optional[Text] = None
    raw_output: Optional[Text] = None
    finish_reason: Optional[Text] = None
    stop_reason: Optional[Text] = None
    template_status: Optional[Text] = None
    prompt_tokens: Optional[Count] = None
    completion_tokens: Optional[Count] = None
    latency_s: Optional[Seconds] = None
    ttft_s: Optional[Seconds] = None
    parse_failure: Optional[Text] = None
    units_from_fallback: Optional[StrictBool] = None
    error: Optional[Text] = None
    samples: Optional[list[SampleRow]] = None  # at most max_samples_per_step (checked first: _too_many_samples)


class Aggregate(_Open):
    """The `aggregate` block (SPEC §7): the numbers the store copies into its `runs` columns."""

    steps: Optional[Count] = None
    tasks: Optional[Count] = None
    avg_command_f1: Optional[Fraction] = None
    avg_command_precision: Optional[Fraction] = None
    avg_command_recall: Optional[Fraction] = None
    first_cmd_exact_pct: Optional[Percent] = None
    valid_json_pct: Optional[Percent] = None
    has_analysis_pct: Optional[Percent] = None
    has_plan_pct: Optional[Percent] = None
    avg_ref_cmds: Optional[NonNegative] = None
    avg_pred_cmds: Optional[NonNegative] = None
    complete_true_recall_pct: Optional[Percent] = None
    premature_complete_rate_pct: Optional[Percent] = None
    next_action_score: Optional[Percent] = None  # 100 × (0.7 F1 + 0.3 first exact)
    samples: Optional[Count] = None
    pass_threshold: Optional[Fraction] = None
    mean_f1_over_samples: Optional[Fraction] = None
    f1_std_mean: Optional[Fraction] = None


class SamplingBlock(_Open):
    """The run-level `sampling` block (SPEC §8; lab.engines.base.Sampling plus engine settings; the published
    harness's own keys, such as LLaDA's `gen_length`, are kept unchecked)."""

    temperature: Optional[NonNegative] = None
    top_p: Optional[Fraction] = None
    max_tokens: Optional[Count] = None
    repetition_penalty: Optional[Finite] = None
    top_k: Optional[Annotated[int, Field(strict=True, ge=-1, le=MAX_COUNT)]] = None
    min_p: Optional[Fraction] = None
    seed: Optional[Seed] = None


class ResultFile(_Open):
    """A whole result file, legacy (386 steps) or corrected (303 steps)."""

    per_step: list[StepRow]
    aggregate: Optional[Aggregate] = None
    sampling: Optional[SamplingBlock] = None
    prompt_template: Optional[dict] = None
    model: Optional[Text] = None
    model_path: Optional[Text] = None
    model_short: Optional[Text] = None
    lora_path: Optional[Text] = None
    gpu: Optional[Text] = None
    timestamp: Optional[Text] = None
    engine_spec: Optional[Text] = None
    contract: Optional[Text] = None
    load_time_sec: Optional[Seconds] = None
    gen_time_sec: Optional[Seconds] = None
    avg_sec_per_step: Optional[Seconds] = None
    replay_steps: Optional[Count] = None
    total_input_steps: Optional[Count] = None
    num_shards: Optional[Count] = None
    shard_index: Optional[Count] = None


def _row_label(rows: Any, index: int) -> str:
    row = rows[index] if isinstance(rows, list) and 0 <= index < len(rows) else None
    if isinstance(row, dict) and "task_id" in row and "step_idx" in row:
        return f"per_step[{index}] ({one_line(row['task_id'], 60)}/{one_line(row['step_idx'], 30)})"
    return f"per_step[{index}]"


def describe_loc(data: Any, loc: Loc) -> str:
    """`per_step[3] (task-000/2) field 'command_f1'` or `field 'aggregate.steps'` for a location in `data`."""
    if len(loc) >= 2 and loc[0] == "per_step" and isinstance(loc[1], int):
        where = _row_label(data.get("per_step") if isinstance(data, dict) else None, loc[1])
        return f"{where} field '{format_loc(loc[2:])}'" if len(loc) > 2 else where
    return f"field '{format_loc(loc)}'"


def _problem(err: dict) -> str:
    value = err.get("input")
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if err.get("type") == "missing":
        return "missing"
    return f"{err['msg'][0].lower()}{err['msg'][1:]} (got {shown})"


def _raise(name: str, problems: list[str]) -> None:
    more = len(problems) - MAX_PROBLEMS_SHOWN
    text = "; ".join(problems[:MAX_PROBLEMS_SHOWN]) + (f"; and {more} more problem(s)" if more > 0 else "")
    raise ResultFileError(f"{name}: {text}")


def duplicate_keys(rows: Iterable[dict]) -> list[tuple[int, int]]:
    """(later index, first index) of every row whose `(task_id, step_idx)` appeared before."""
    seen: dict[tuple, int] = {}
    dups = []
    for i, row in enumerate(rows):
        key = (row.get("task_id"), row.get("step_idx"))
        if key in seen:
            dups.append((i, seen[key]))
        else:
            seen[key] = i
    return dups


def _too_many_samples(rows: list) -> list[str]:
    """Steps with more sampled answers than `replay --samples` makes: refused before anything else is read
    (60 steps of 5,000 samples took 88 s to import when each was checked and scored)."""
    cap = max_samples_per_step()
    return [f"{_row_label(rows, i)} field 'samples': {len(row['samples']):,} sampled answers; a step holds at most "
            f"{cap:,} (as `replay --samples` makes)"
            for i, row in enumerate(rows)
            if isinstance(row, dict) and isinstance(row.get("samples"), list) and len(row["samples"]) > cap]


def validate_result(data: Any, name: str = "result") -> None:
    """Raise ResultFileError (file, row, field) unless `data` is a usable result file."""
    if not isinstance(data, dict):
        raise ResultFileError(f"{name}: top level must be a JSON object, got {type(data).__name__}")
    if not isinstance(data.get("per_step"), list):
        raise ResultFileError(f"{name}: missing 'per_step' list; is this a TB2-lite result file?")
    too_many = _too_many_samples(data["per_step"])
    if too_many:
        _raise(name, too_many)
    problems = [f"{describe_loc(data, loc)}: not a finite number ({value})" for loc, value in non_finite(data)]
    if problems:
        _raise(name, problems)
    try:
        ResultFile.model_validate(data)
    except ValidationError as exc:
        _raise(name, [f"{describe_loc(data, tuple(e['loc']))}: {_problem(e)}" for e in exc.errors()])
    dups = duplicate_keys(data["per_step"])
    if dups:
        _raise(name, [f"{_row_label(data['per_step'], i)}: duplicate (task_id, step_idx), first at per_step[{j}]"
                      for i, j in dups])


def validate_rows(rows: list[dict], name: str) -> None:
    """Check per-step rows alone (a resume checkpoint) with the same rules."""
    validate_result({"per_step": rows}, name)
