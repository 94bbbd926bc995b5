"""The numbers a training run's log gets for one evaluated checkpoint (names and sources: options.yaml)."""
from __future__ import annotations

from lab.training.options import training_defaults


def checkpoint_metrics(replay_aggregate: dict | None, reference_aggregate: dict | None) -> dict[str, float]:
    """Log key -> value for every metric whose source exists and holds a number."""
    sources = {"replay": replay_aggregate or {}, "reference": reference_aggregate or {}}
    out: dict[str, float] = {}
    for key, rule in training_defaults()["metrics"].items():
        value = sources[rule["from"]].get(rule["field"])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value) * float(rule.get("scale", 1))
            out[key] = round(value, int(rule["digits"])) if "digits" in rule else value
    return out


def timing_metrics(seconds: float, failed: bool) -> dict[str, float]:
    """The evaluation's wall time and whether it failed (1.0) or not (0.0)."""
    names = training_defaults()["timing"]
    return {names["seconds"]: round(float(seconds), 3), names["failed"]: 1.0 if failed else 0.0}


def for_kind(metrics: dict[str, float], kind: str) -> dict[str, float]:
    """A subset run's numbers under options.yaml's `subset_prefix` (tb2lite/subset/score …); others as they are."""
    if kind != "subset":
        return dict(metrics)
    prefix = str(training_defaults()["subset_prefix"])
    return {(prefix + k.split("/", 1)[1]) if k.startswith("tb2lite/") else k: v for k, v in metrics.items()}
