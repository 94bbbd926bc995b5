"""A config's rows back into the result files they came from: the run (the published schema, with the lab's
extras) and, where the rows carry the reference's likelihood, its `score-reference` file."""
from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from lab.engines.logprobs import read_summary
from lab.errors import LabError, ResultFileError
from lab.resultfiles.schema import validate_result
from lab.store.dataset.layout import limits, step_columns
from lab.store.dataset.parquet_read import json_object
from lab.store.reference_records import REFERENCE_KIND

LOGPROB_KEYS = ("lp_mean", "lp_min", "lp_low_tokens")
REFERENCE_KEYS = ("ref_tokens", "ref_logprob", "ref_nll_per_token")
# top-level fields of the run's settings that are the rows' or the import's, never taken from the metadata
NOT_SETTINGS = ("per_step", "aggregate", "kind")
AGGREGATE_TOLERANCE = 5e-4  # the aggregate's mean F1 against its steps' (4 decimals in a result file)


def _restored_columns() -> list[str]:
    return [c.name for c in step_columns() if c.restore and c.group == "published"]


def step_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """One result-file row from one dataset row: the published fields given, the extra fields kept in
    `extra_json`, the log-probabilities' summary, the sampled answers."""
    out = {k: row[k] for k in _restored_columns() if row.get(k) is not None}
    extra = json_object(row.get("extra_json"), where)
    out.update({k: v for k, v in extra.items() if k not in out and k not in ("logprobs", "logprobs_summary", "samples")})
    summary = {k: row[k] for k in LOGPROB_KEYS if row.get(k) is not None}
    if summary:
        values, why = read_summary(summary)
        if values is None:
            raise LabError(f"{where}: {why}")
        out["logprobs_summary"] = {k: v for k, v in values.items() if v is not None}
    samples = row.get("samples") or []
    if len(samples) > limits()["max_samples"]:
        raise LabError(f"{where}: {len(samples)} sampled answers, more than a step may have ({limits()['max_samples']})")
    if samples:
        out["samples"] = [{k: v for k, v in s.items() if v is not None} for s in samples]
    return out


def _check_aggregate(aggregate: dict, per_step: list[dict], name: str) -> None:
    """The aggregate's mean F1 must be its steps' (an aggregate is what Results ranks: it cannot be made up)."""
    value = aggregate.get("avg_command_f1")
    scored = [r["command_f1"] for r in per_step if isinstance(r.get("command_f1"), (int, float))]
    if value is None or not scored or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    mean = math.fsum(scored) / len(scored)
    if abs(float(value) - mean) > AGGREGATE_TOLERANCE:
        raise LabError(f"{name}: its aggregate says avg_command_f1 {value}, but its steps' mean is {mean:.4f}")


def run_result(table: pa.Table, meta: dict[str, Any], name: str) -> dict[str, Any]:
    """The result file of one config: its settings (metadata `meta`, else a name) around its rows, checked by
    the one validator of result files."""
    settings = meta.get("meta") if isinstance(meta.get("meta"), dict) else {}
    settings = {k: v for k, v in settings.items() if k not in NOT_SETTINGS}
    settings.setdefault("model", name)
    per_step = [step_row(row, f"{name}: row {i}") for i, row in enumerate(table.to_pylist())]
    if not per_step:
        raise LabError(f"{name}: no rows")
    result = {**settings, "per_step": per_step}
    aggregate = meta.get("aggregate")
    if isinstance(aggregate, dict) and aggregate:
        result["aggregate"] = aggregate
    try:
        validate_result(result, name)
    except ResultFileError as exc:
        raise LabError(str(exc)) from None
    _check_aggregate(result.get("aggregate") or {}, per_step, name)
    return result


def reference_result(table: pa.Table, result: dict[str, Any]) -> dict[str, Any] | None:
    """The `score-reference` file of the run's model on these steps (None when no row carries one); the store
    joins it to the run by model_path and lora_path, as it did before the export."""
    rows = [{"task_id": r["task_id"], "step_idx": r["step_idx"], **{k: r[k] for k in REFERENCE_KEYS}}
            for r in table.select(["task_id", "step_idx", *REFERENCE_KEYS]).to_pylist() if r["ref_logprob"] is not None]
    if not rows:
        return None
    tokens = sum(r["ref_tokens"] or 0 for r in rows)
    total = -math.fsum(r["ref_logprob"] for r in rows)
    return {"kind": REFERENCE_KIND, "model_path": result.get("model_path"), "lora_path": result.get("lora_path"),
            "model_short": result.get("model_short"), "contract": result.get("contract"),
            "engine_spec": result.get("engine_spec"),
            "aggregate": {"ref_nll_per_token": round(total / tokens, 6) if tokens else None}, "per_step": rows}
