"""N sampled answers per step: N generate calls with seeds S, S+1, …; rows keep sample 0's fields.

Each per-step row stays the published schema for sample 0 and gains `samples`: one entry per
answer (its seed, raw output, command units and metrics). `lab.runs.sample_scores.rescore_samples`
recomputes those metrics and the aggregate's sampling figures from the stored units, as `lab rescore` does.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import yaml

from lab.data.step import Step
from lab.errors import LabError
from lab.engines.base import Sampling
from lab.engines.common import EngineBase
from lab.prompts.render import RenderedPrompt
from lab.runs.pipeline import StepResult, run_steps
from lab.settings import PROJECT_ROOT
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD
from lab.tb2lite import CORRECTED

DEFAULT_SEED = 0
DEFAULTS_PATH = PROJECT_ROOT / "assets" / "stability.yaml"


@dataclass(frozen=True)
class StabilityDefaults:
    """assets/stability.yaml: Compare's and Triage's defaults for sampling stability."""

    samples: int = 5
    seed: int = DEFAULT_SEED
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    unstable_spread: float = 0.5
    fallback_temperature: float = 0.7
    fallback_top_p: float = 0.95


@lru_cache(maxsize=1)
def load_stability_defaults(path: str | None = None) -> StabilityDefaults:
    """Read the defaults file (LabError naming it when it is malformed)."""
    p = path or str(DEFAULTS_PATH)
    try:
        with open(p, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
        fallback = data.get("fallback_sampling") or {}
        return StabilityDefaults(
            samples=int(data.get("samples", 5)), seed=int(data.get("seed", DEFAULT_SEED)),
            pass_threshold=float(data.get("pass_threshold", DEFAULT_PASS_THRESHOLD)),
            unstable_spread=float(data.get("unstable_spread", 0.5)),
            fallback_temperature=float(fallback.get("temperature", 0.7)),
            fallback_top_p=float(fallback.get("top_p", 0.95)),
        )
    except (OSError, yaml.YAMLError, TypeError, ValueError, AttributeError) as exc:
        raise LabError(f"{p}: cannot read the sampling-stability defaults ({exc}); fix or delete the file") from None


def sampling_for_samples(default: Sampling, temperature: float | None = None, top_p: float | None = None,
                         max_tokens: int | None = None) -> Sampling:
    """Sampling for N answers: the values given, else the engine's preset when it samples
    (temperature > 0, e.g. the GRPO card's 0.7/0.95), else the defaults file's fallback."""
    defaults = load_stability_defaults()
    greedy = default.temperature <= 0
    temp = temperature if temperature is not None else (defaults.fallback_temperature if greedy else default.temperature)
    if top_p is None:
        top_p = defaults.fallback_top_p if greedy and temperature is None else default.top_p
    changes = {"temperature": float(temp), "top_p": float(top_p)}
    if max_tokens is not None:
        changes["max_tokens"] = int(max_tokens)
    return replace(default, **changes)
METRIC_KEYS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")


def sample_entry(index: int, seed: int | None, result: StepResult) -> dict:
    """One answer of a step's `samples` list (raw output, units, metrics, generation facts)."""
    completion, parsed = result.completion, result.parsed
    return {
        "sample": index,
        "seed": seed,
        "raw_output": completion.text or "",
        "pred_command_units": list(parsed.command_units),
        "valid_json": parsed.valid_json,
        "pred_task_complete": parsed.task_complete,
        **result.metrics.to_dict(),
        "finish_reason": completion.finish_reason,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "parse_failure": parsed.failure,
        "error": completion.error,
    }


def base_seed(sampling: Sampling, seed: int | None = None) -> int:
    """The seed of sample 0: the one asked for, else the sampling's, else 0."""
    if seed is not None:
        return int(seed)
    return int(sampling.seed) if sampling.seed is not None else DEFAULT_SEED


def run_sampled_steps(
    engine: EngineBase,
    steps: list[Step],
    sampling: Sampling,
    on_result: Callable[[int, StepResult], None] | None = None,
    scorer: str = CORRECTED,
    prompts: list[RenderedPrompt] | None = None,
    *,
    n: int,
    seed: int | None = None,
) -> list[StepResult]:
    """Generate `n` answers per step (seeds seed, seed+1, …) through `engine.generate`.

    Returns sample 0's StepResults whose `per_step` rows carry the `samples` list; `on_result`
    fires per step once all its samples are scored.
    """
    if n < 1:
        raise ValueError(f"samples must be at least 1, got {n}")
    first = base_seed(sampling, seed)
    by_sample = [
        run_steps(engine, steps, replace(sampling, seed=first + k), None, scorer, prompts) for k in range(n)
    ]
    keyed = [{r.step.key: r for r in results} for results in by_sample]  # a cancel (Stop) may drop some
    merged = []
    for i, result in enumerate(r for r in by_sample[0] if all(r.step.key in ks for ks in keyed)):
        row = dict(result.per_step)
        row["samples"] = [sample_entry(k, first + k, keyed[k][result.step.key]) for k in range(n)]
        result.per_step = row
        merged.append(result)
        if on_result is not None:
            on_result(i, result)
    return merged
