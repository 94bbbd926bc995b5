"""Turn one result dict (SPEC §8, legacy or corrected) into a `runs` row and a `steps` Arrow table."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from lab.data.step import bucket_of
from lab.engines.logprobs import TokenLogprobs, read_summary
from lab.errors import ResultFileError
from lab.resultfiles.files import scoring_version
from lab.resultfiles.units import coerce_units
from lab.store.names import (
    checkpoint_step_of,
    display_name,
    epochs_of,
    family_of,
    params_of,
    training_method_of,
)


def _bool(v: Any) -> bool | None:
    return None if v is None else bool(v)


def _float(v: Any) -> float | None:
    if v is None or isinstance(v, str) and not v.strip():
        return None
    return float(v)


def _int(v: Any) -> int | None:
    return None if v is None or v == "" else int(v)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


# steps column -> (arrow type, converter of the per_step value under the same key)
STEP_FIELDS: dict[str, tuple[pa.DataType, Callable[[Any], Any]]] = {
    "sample_idx": (pa.int32(), _int),
    "valid_json": (pa.bool_(), _bool),
    "has_analysis": (pa.bool_(), _bool),
    "has_plan": (pa.bool_(), _bool),
    "ref_task_complete": (pa.bool_(), _bool),
    "pred_task_complete": (pa.bool_(), _bool),
    "pred_task_complete_true": (pa.bool_(), _bool),
    "first_cmd_exact": (pa.float64(), _float),
    "command_precision": (pa.float64(), _float),
    "command_recall": (pa.float64(), _float),
    "command_f1": (pa.float64(), _float),
    "pred_preview": (pa.string(), _str),
    "raw_output": (pa.string(), _str),
    "finish_reason": (pa.string(), _str),
    "stop_reason": (pa.string(), _str),
    "template_status": (pa.string(), _str),
    "prompt_tokens": (pa.int32(), _int),
    "completion_tokens": (pa.int32(), _int),
    "latency_s": (pa.float64(), _float),
    "ttft_s": (pa.float64(), _float),
    "parse_failure": (pa.string(), _str),
    "units_from_fallback": (pa.bool_(), _bool),
    "error": (pa.string(), _str),
}
_DERIVED = ("task_id", "step_idx", "source_group", "bucket", "ref_command_units", "pred_command_units",
            "samples",  # sampled answers go to the `samples` table (lab.store.sample_records)
            "logprobs",  # token log-probabilities: summarised in lp_mean / lp_min / lp_low_tokens
            "logprobs_summary")  # or only that summary (a run imported from a dataset)
LOGPROB_COLUMNS = (("lp_mean", pa.float64()), ("lp_min", pa.float64()), ("lp_low_tokens", pa.int32()))
STEP_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("ord", pa.int32()),
        ("task_id", pa.string()),
        ("step_idx", pa.int32()),
        ("step_key", pa.string()),
        ("source_group", pa.string()),
        ("bucket", pa.string()),
        ("n_ref_units", pa.int32()),
        ("n_pred_units", pa.int32()),
        ("ref_command_units", pa.list_(pa.string())),
        ("pred_command_units", pa.list_(pa.string())),
        *[(name, typ) for name, (typ, _) in STEP_FIELDS.items()],
        *LOGPROB_COLUMNS,
        ("extra_json", pa.string()),
    ]
)

# aggregate keys copied to runs columns of the same name
AGGREGATE_FIELDS = (
    "avg_command_f1", "avg_command_precision", "avg_command_recall", "first_cmd_exact_pct", "valid_json_pct",
    "has_analysis_pct", "has_plan_pct", "avg_ref_cmds", "avg_pred_cmds", "complete_true_recall_pct",
    "premature_complete_rate_pct", "next_action_score",
)


# steps of the full replay selection per scoring version: the denominator of a run's coverage
# when its file does not say (`total_input_steps`, else `replay_steps`)
FULL_STEPS = {"corrected_303": 303, "legacy_386": 386}
MAX_REPLAY_STEPS = 10**6


def replay_steps_of(result: dict) -> int | None:
    """`replay_steps` of a result the lab wrote (the scored steps of the replay it was made on), or None
    when the file does not say or says something that is not a whole number of steps."""
    value = result.get("replay_steps")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_REPLAY_STEPS:
        return None
    return value


def selected_steps_of(result: dict) -> int | None:
    """The steps of a selection limited on purpose (`selection` with a `limit` or `tasks`: --limit, --tasks,
    the training callback's limit=/tasks=), when fewer than the replay's; None otherwise (or when the file
    does not say how many, or says something that is not a whole number of steps)."""
    selection = result.get("selection")
    if not isinstance(selection, dict) or (selection.get("limit") is None and not selection.get("tasks")):
        return None
    value = selection.get("steps")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_REPLAY_STEPS:
        return None
    replay = replay_steps_of(result)
    return value if replay is None or value < replay else None


def coverage_fields(result: dict, steps: int, version: str) -> dict[str, Any]:
    """total_steps, coverage (0-1), selected_steps, num_shards, shard_index and partial of one result dict. The
    whole a run is counted against: the shards' `total_input_steps`, else the steps of a selection limited on
    purpose (`--limit 2`: complete at 2 steps, not partial), else the replay it was made on (`replay_steps`: a run
    of 2 steps on a 14-step replay is 2/14), else the full step set of its scoring version."""
    shards, index = _int(result.get("num_shards")), _int(result.get("shard_index"))
    one_shard = shards is not None and shards > 1 and index is not None
    selected = None if one_shard else selected_steps_of(result)
    if selected is not None and steps > selected:  # more answers than it says it chose: the claim is not believed
        selected = None
    total = (_int(result.get("total_input_steps")) or selected or replay_steps_of(result) or FULL_STEPS.get(version)
             or steps)
    coverage = round(min(steps / total, 1.0), 4) if total else None
    return {"total_steps": total, "coverage": coverage, "selected_steps": selected, "num_shards": shards,
            "shard_index": index, "partial": bool(one_shard or (coverage is not None and coverage < 1))}


@dataclass(frozen=True)
class ModelFacts:
    """What the published leaderboard knows about a model id (family, sizes, training)."""

    family: str | None
    params_b: float | None
    active_params_b: float | None
    training: str | None
    training_method: str | None
    epochs: int | None


def steps_table(run_id: str, per_step: list[dict], name: str) -> pa.Table:
    """The per-step rows as an Arrow table in `steps` column order; errors name the file and row."""
    cols: dict[str, list] = {field.name: [] for field in STEP_SCHEMA}
    for i, row in enumerate(per_step):
        try:
            task_id = str(row["task_id"])
            step_idx = int(row["step_idx"])
            ref_units = coerce_units(row.get("ref_command_units"))
            pred_units = coerce_units(row.get("pred_command_units"))
            cols["run_id"].append(run_id)
            cols["ord"].append(i)
            cols["task_id"].append(task_id)
            cols["step_idx"].append(step_idx)
            cols["step_key"].append(f"{task_id}/{step_idx}")
            cols["source_group"].append(str(row.get("source_group") or "unknown"))
            cols["bucket"].append(str(row.get("bucket") or bucket_of(step_idx)))
            cols["n_ref_units"].append(len(ref_units))
            cols["n_pred_units"].append(len(pred_units))
            cols["ref_command_units"].append(ref_units)
            cols["pred_command_units"].append(pred_units)
            for key, (_, convert) in STEP_FIELDS.items():
                cols[key].append(convert(row.get(key)))
            summary = logprob_summary(row)
            for key, _ in LOGPROB_COLUMNS:
                cols[key].append(summary.get(key))
            extra = {k: v for k, v in row.items() if k not in STEP_FIELDS and k not in _DERIVED}
            cols["extra_json"].append(json.dumps(extra, ensure_ascii=False) if extra else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultFileError(f"{name}: per_step[{i}]: {type(exc).__name__}: {exc}") from None
    return pa.table(cols, schema=STEP_SCHEMA)


def logprob_summary(row: dict) -> dict:
    """A step's lp_mean / lp_min / lp_low_tokens: from its tokens' log-probabilities, else from the summary
    a row keeps without them ({}: not recorded, or malformed)."""
    recorded = TokenLogprobs.from_record(row.get("logprobs"))
    if recorded is not None:
        return recorded.summary()
    return read_summary(row.get("logprobs_summary"))[0] or {}


def run_row(
    result: dict,
    run_id: str,
    *,
    path: str,
    file_size: int | None,
    file_mtime: float | None,
    imported_at: Any,
    short_to_repo: dict[str, str] | None = None,
    facts_by_id: dict[str, ModelFacts] | None = None,
) -> dict[str, Any]:
    """The `runs` row of one result dict (SPEC §9 display name, defaults for missing metadata)."""
    per_step = result["per_step"]
    aggregate = result.get("aggregate") or {}
    template = result.get("prompt_template") if isinstance(result.get("prompt_template"), dict) else {}
    name = display_name(result, short_to_repo)
    model_path = _str(result.get("model_path"))
    model_id = name if facts_by_id and name in facts_by_id else (
        model_path if model_path and not model_path.startswith("/") else None
    )
    facts = (facts_by_id or {}).get(model_id or "")
    naming = " ".join(str(result.get(k) or "") for k in ("model_path", "model_short", "model", "lora_path", "lora_name"))
    total, active = params_of(name)
    if total is None:
        total, active = params_of(naming)
    f1 = _float(aggregate.get("avg_command_f1"))
    row: dict[str, Any] = {
        "run_id": run_id,
        "path": path,
        "file_size": file_size,
        "file_mtime": file_mtime,
        "model": _str(result.get("model")),
        "model_path": model_path,
        "model_id": model_id,
        "display_name": name,
        "model_short": _str(result.get("model_short")),
        "lora_path": _str(result.get("lora_path")),
        "scoring_version": scoring_version(result),
        "steps": int(aggregate.get("steps") or len(per_step)),
        "tasks": int(aggregate.get("tasks") or len({r.get("task_id") for r in per_step})),
        "score": round(100 * f1, 2) if f1 is not None else None,
        **{key: _float(aggregate.get(key)) for key in AGGREGATE_FIELDS},
        "avg_sec_per_step": _float(result.get("avg_sec_per_step")),
        "load_time_sec": _float(result.get("load_time_sec")),
        "gen_time_sec": _float(result.get("gen_time_sec")),
        "template_status": str(template.get("template_status") or "unknown"),
        "rank_eligible": bool(template.get("rank_eligible", True)),
        "timestamp": _str(result.get("timestamp")),
        "gpu": _str(result.get("gpu")),
        "engine_spec": _str(result.get("engine_spec")),
        "contract": _str(result.get("contract")),
        "source": "file",
        "family": facts.family if facts else family_of(naming) or family_of(name),
        "params_b": facts.params_b if facts else total,
        "active_params_b": facts.active_params_b if facts else active,
        "training": facts.training if facts else None,
        "training_method": facts.training_method if facts else training_method_of(naming + " " + name),
        "epochs": facts.epochs if facts else epochs_of(name) or epochs_of(naming),
        # checkpoint-0 counts (the base model's position); a run named by its file (`?name=checkpoint-0`) too
        "checkpoint_step": _first_known(checkpoint_step_of(name), checkpoint_step_of(naming),
                                        checkpoint_step_of(str(path).rsplit("/", 1)[-1])),
        "meta_json": json.dumps(
            {k: v for k, v in result.items() if k not in ("per_step", "aggregate")}, ensure_ascii=False, default=str
        ),
        "aggregate_json": json.dumps(aggregate, ensure_ascii=False, default=str),
        "imported_at": imported_at,
    }
    row.update(coverage_fields(result, row["steps"], row["scoring_version"]))
    return row


def _first_known(*values: int | None) -> int | None:
    """The first value that is not None (0 included: `checkpoint-0` is the base model's position)."""
    return next((v for v in values if v is not None), None)
