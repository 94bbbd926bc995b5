"""Rescore sampled answers (replay --samples) from their stored units: no engine, prompt or pipeline needed."""
from __future__ import annotations

from lab.resultfiles.units import coerce_units
from lab.scoring.metrics import score_batch
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD, sampled_rows, stability_aggregate


def rescore_samples(result: dict, scorer: str, threshold: float | None = None) -> dict:
    """Recompute every sample's metrics from its stored units (against the row's reference units)
    and the aggregate's sampling figures; `result` is changed in place and returned."""
    rows = sampled_rows(result.get("per_step") or [])
    if not rows:
        return result
    pairs, where = [], []
    for r, row in enumerate(rows):
        ref = coerce_units(row.get("ref_command_units"))
        for s, sample in enumerate(row["samples"]):
            pairs.append((coerce_units(sample.get("pred_command_units")), ref))
            where.append((r, s))
    metrics = score_batch(pairs, scorer)
    new_samples = [list(row["samples"]) for row in rows]
    for (r, s), m, (pred, _) in zip(where, metrics, pairs):
        new_samples[r][s] = {**new_samples[r][s], "pred_command_units": pred, **m.to_dict()}
    for row, samples in zip(rows, new_samples):
        row["samples"] = samples
    agg = result.get("aggregate") or {}
    if threshold is None:
        threshold = float(agg.get("pass_threshold", DEFAULT_PASS_THRESHOLD))
    result["aggregate"] = {**agg, **stability_aggregate(result["per_step"], threshold)}
    return result
