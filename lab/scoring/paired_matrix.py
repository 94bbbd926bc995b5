"""One baseline against many runs as matrix products: the same replicates and summaries lab.scoring.paired
computes one PairedMetric at a time, from per-task sums of every comparison at once.

The runs' per-step values come as one matrix (runs × steps, NaN where a run lacks a step or the value) and
each comparison's common steps as a mask (comparisons × steps), so runs with different step sets stay exact:
a comparison's per-task sums are taken over its own common steps only. The bootstrap's task counts (one
(resamples × tasks) matrix, lab.scoring.paired.task_counts) times the per-task sums give every resample's
totals; a ratio of those is the replicate, as in lab.scoring.paired.replicates (which it equals, up to the
rounding of sums taken in another order). Columns that are the same for many comparisons (the baseline's
sums when the common steps are the same, the weights of a mean) are multiplied once.

Comparisons whose runs have several answers per step (the two-level bootstrap) are not for this module:
lab.scoring.paired.replicates draws their answers.
"""
from __future__ import annotations

import numpy as np

from lab.scoring.paired import Summary


def task_sums(values: np.ndarray, mask: np.ndarray, step_task: np.ndarray, n_tasks: int) -> np.ndarray:
    """(comparisons, tasks): per comparison, Σ values over its masked steps of each task. `values` is
    (comparisons, steps) or one row (steps,) shared by every comparison; `step_task` is each step's task
    (0 … n_tasks − 1; a masked-out step may carry any index below n_tasks)."""
    mask = np.asarray(mask, dtype=bool)
    rows = mask.shape[0]
    picked = np.where(mask, np.broadcast_to(values, mask.shape), 0.0)
    index = (np.arange(rows, dtype=np.int64)[:, None] * n_tasks + np.asarray(step_task)[None, :]).ravel()
    return np.bincount(index, weights=picked.ravel(), minlength=rows * n_tasks).reshape(rows, n_tasks)


def _totals(counts: np.ndarray, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(counts @ unique columns, which unique column each comparison's is): sums shared by comparisons are
    multiplied once."""
    unique, inverse = np.unique(sums, axis=0, return_inverse=True)
    return counts @ unique.T, inverse.ravel()


def replicate_columns(counts: np.ndarray, base_value: np.ndarray, base_weight: np.ndarray, cand_value: np.ndarray,
                      cand_weight: np.ndarray, scale: float, chunk: int = 256) -> np.ndarray:
    """(resamples, comparisons): scale × (candidate total / its weight − baseline total / its weight) per
    resample, each argument (comparisons, tasks) per-task sums on the comparison's common steps. Comparisons
    that share the baseline's sums and the candidate's weights (the same common steps) are one group: their
    shared columns are computed once and broadcast."""
    counts = np.asarray(counts, dtype=float)
    k = cand_value.shape[0]
    out = np.empty((counts.shape[0], k))
    base_v, base_v_at = _totals(counts, base_value)
    base_w, base_w_at = _totals(counts, base_weight)
    cand_w, cand_w_at = _totals(counts, cand_weight)
    groups: dict[tuple[int, int, int], list[int]] = {}
    for j, key in enumerate(zip(base_v_at.tolist(), base_w_at.tolist(), cand_w_at.tolist())):
        groups.setdefault(key, []).append(j)
    with np.errstate(invalid="ignore", divide="ignore"):
        for (bv, bw, cw), members in groups.items():
            base = base_v[:, bv:bv + 1] / base_w[:, bw:bw + 1]
            weight = cand_w[:, cw:cw + 1]
            for first in range(0, len(members), chunk):
                cols = members[first:first + chunk]
                block = counts @ cand_value[cols].T
                np.divide(block, weight, out=block)
                np.subtract(block, base, out=block)
                block *= scale
                if cols == list(range(cols[0], cols[0] + len(cols))):
                    out[:, cols[0]:cols[0] + len(cols)] = block
                else:
                    out[:, cols] = block
    return out


def figures(counts: np.ndarray, value: np.ndarray, weight: np.ndarray, scale: float) -> np.ndarray:
    """(resamples, runs): each run's bootstrap figure, scale × Σ value / Σ weight over the drawn tasks, from
    (runs, tasks) per-task sums: the input of lab.scoring.best.best_chances."""
    counts = np.asarray(counts, dtype=float)
    weights, at = _totals(counts, weight)
    with np.errstate(invalid="ignore", divide="ignore"):
        return scale * (counts @ value.T) / weights[:, at]


def summaries(base_value: np.ndarray, base_weight: np.ndarray, cand_value: np.ndarray, cand_weight: np.ndarray,
              mask: np.ndarray, step_task: np.ndarray, n_tasks: int, scale: float, higher_is_better: bool,
              tolerance: float) -> list[Summary]:
    """Each comparison's Summary (lab.scoring.paired.summarize of its PairedMetric): the baseline's values
    and weights one row (steps,), the candidates' (comparisons, steps), the common steps `mask`."""
    mask = np.asarray(mask, dtype=bool)
    base_v, base_w = np.broadcast_to(base_value, mask.shape), np.broadcast_to(base_weight, mask.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        fig_base = scale * np.where(mask, base_v, 0.0).sum(axis=1) / np.where(mask, base_w, 0.0).sum(axis=1)
        fig_cand = scale * np.where(mask, cand_value, 0.0).sum(axis=1) / np.where(mask, cand_weight, 0.0).sum(axis=1)
        per_base = np.where(base_w > 0, base_v / np.where(base_w > 0, base_w, 1.0), np.nan)
        per_cand = np.where(cand_weight > 0, cand_value / np.where(cand_weight > 0, cand_weight, 1.0), np.nan)
    diff = np.where(mask, (per_cand - per_base) * (1 if higher_is_better else -1), np.nan)
    improved = (diff > tolerance).sum(axis=1)
    regressed = (diff < -tolerance).sum(axis=1)
    compared = (~np.isnan(diff)).sum(axis=1)
    weights = task_sums(np.where(mask, base_w + cand_weight, 0.0), mask, step_task, n_tasks)
    steps_per_task = task_sums(np.ones(mask.shape[1]), mask, step_task, n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        effective = np.where(weights.sum(axis=1) > 0, weights.sum(axis=1) ** 2 / (weights ** 2).sum(axis=1), 0.0)
    return [Summary(float(fig_base[j]), float(fig_cand[j]), int(mask[j].sum()), int((steps_per_task[j] > 0).sum()),
                    float(effective[j]), int(improved[j]), int(regressed[j]), int(compared[j] - improved[j] - regressed[j]),
                    False, higher_is_better) for j in range(mask.shape[0])]
