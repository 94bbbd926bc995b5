"""Stability under sampling: per-step figures over N sampled answers, run aggregates, pass@k.

A step *passes* when a sample's command F1 is at least the pass threshold (default 0.5).
pass@k is the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models
Trained on Code"): with n samples of which c pass, pass@k = 1 − C(n−c, k) / C(n, k), the
chance that at least one of k samples drawn without replacement from the n passes; the run's
pass@k is its mean over steps. Spread is max − min of the samples' F1; std is the population
standard deviation (ddof = 0) of the samples' F1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean, pstdev
from typing import Iterable, Sequence

DEFAULT_PASS_THRESHOLD = 0.5
PASS_AT_K_ESTIMATOR = "unbiased (Chen et al. 2021): 1 - C(n-c,k)/C(n,k), mean over steps"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one step: `n` samples, `c` of them passing, `k` ≤ n drawn."""
    if not 0 < k <= n or not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 < k <= n and 0 <= c <= n (got n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass(frozen=True)
class SampleStats:
    """One step's figures over its samples (mean and std unrounded; round them for display)."""

    n: int
    f1_mean: float
    f1_std: float
    f1_min: float
    f1_max: float
    n_pass: int
    n_distinct: int  # distinct answers (command-unit lists)

    @property
    def spread(self) -> float:
        return round(self.f1_max - self.f1_min, 4)


def sample_stats(samples: Sequence[dict], threshold: float = DEFAULT_PASS_THRESHOLD) -> SampleStats:
    """Figures of one step's `samples` (dicts with `command_f1` and `pred_command_units`)."""
    if not samples:
        raise ValueError("a step with samples needs at least one")
    f1s = [float(s["command_f1"]) for s in samples]
    return SampleStats(
        n=len(f1s),
        f1_mean=fmean(f1s),
        f1_std=pstdev(f1s),
        f1_min=min(f1s),
        f1_max=max(f1s),
        n_pass=sum(f >= threshold for f in f1s),
        n_distinct=len({answer_key(s) for s in samples}),
    )


def sampled_rows(per_step: Iterable[dict]) -> list[dict]:
    """The per-step rows that carry a non-empty `samples` list."""
    return [r for r in per_step if isinstance(r.get("samples"), list) and r["samples"]]


def stability_aggregate(per_step: Iterable[dict], threshold: float = DEFAULT_PASS_THRESHOLD) -> dict:
    """The aggregate's sampling figures over the rows that carry `samples` ({} when none do).

    `mean_f1_over_samples`: mean over steps of the step's mean sample F1; `f1_std_mean`: mean
    over steps of the step's F1 standard deviation; `pass_at_k`: {"1": …, …, "N": …} for k up to
    the smallest sample count of any step.
    """
    rows = sampled_rows(per_step)
    if not rows:
        return {}
    stats = [sample_stats(r["samples"], threshold) for r in rows]
    n_min = min(s.n for s in stats)
    return {
        "samples": n_min,
        "pass_threshold": threshold,
        "mean_f1_over_samples": round(fmean(s.f1_mean for s in stats), 4),
        "f1_std_mean": round(fmean(s.f1_std for s in stats), 4),
        "pass_at_k": {str(k): round(fmean(pass_at_k(s.n, s.n_pass, k) for s in stats), 4) for k in range(1, n_min + 1)},
        "pass_at_k_estimator": PASS_AT_K_ESTIMATOR,
    }


def answer_key(sample: dict) -> tuple[str, ...]:
    """What makes two sampled answers identical: the same command units, in order."""
    return tuple(str(u) for u in sample.get("pred_command_units") or [])


@dataclass
class AnswerGroup:
    """Identical sampled answers collapsed: their units, count, F1 and which samples they were."""

    units: list[str]
    count: int
    command_f1: float
    samples: list[int] = field(default_factory=list)
    example_raw: str = ""
    raw_variants: int = 1  # distinct raw texts behind the same units (e.g. other analysis wording)


def collapse_answers(samples: Sequence[dict]) -> list[AnswerGroup]:
    """Group samples by identical command units; most frequent first (ties: higher F1, then first seen)."""
    groups: dict[tuple[str, ...], AnswerGroup] = {}
    raws: dict[tuple[str, ...], set[str]] = {}
    for i, s in enumerate(samples):
        key = answer_key(s)
        index = int(s.get("sample", i))
        if key not in groups:
            groups[key] = AnswerGroup(list(key), 0, float(s["command_f1"]), [], str(s.get("raw_output") or ""))
            raws[key] = set()
        groups[key].count += 1
        groups[key].samples.append(index)
        raws[key].add(str(s.get("raw_output") or ""))
    for key, group in groups.items():
        group.raw_variants = len(raws[key])
    order = {key: pos for pos, key in enumerate(groups)}
    return sorted(groups.values(), key=lambda g: (-g.count, -g.command_f1, order[tuple(g.units)]))


@dataclass
class SampleSummary:
    """What a viewer shows for one engine's samples of one step: figures, pass@k, collapsed answers."""

    stats: SampleStats
    pass_at_k: dict[int, float]
    groups: list[AnswerGroup]
    threshold: float


def summarize_samples(samples: Sequence[dict], threshold: float = DEFAULT_PASS_THRESHOLD) -> SampleSummary:
    """Figures, pass@k for k = 1…n and the collapsed answers of one step's samples."""
    stats = sample_stats(samples, threshold)
    ks = {k: pass_at_k(stats.n, stats.n_pass, k) for k in range(1, stats.n + 1)}
    return SampleSummary(stats, ks, collapse_answers(samples), threshold)
