"""The max-T statistic of every pair of k runs judged together (lab.scoring.ranking): per bootstrap resample,
the largest studentized difference over all k(k−1)/2 pairs."""
from __future__ import annotations

import numpy as np


def worst_pairs(dev: np.ndarray, se: np.ndarray, chunk_values: int) -> np.ndarray:
    """Per resample: the largest |devⱼ − devᵢ| / seᵢⱼ over the pairs i < j with seᵢⱼ > 0 (0 when none), run by
    run against the runs after it, so a thousand runs never hold their million pairs at once."""
    k = dev.shape[1]
    rows = dev.T.copy()                                    # (runs, resamples): each run's deviations in a row
    worst = np.zeros(dev.shape[0])
    safe, zero = np.where(se > 0, se, 1.0), se <= 0
    block = max(1, chunk_values // max(dev.shape[0], 1))
    buffer = np.empty((min(block, max(k - 1, 1)), dev.shape[0]))
    for i in range(k - 1):
        for first in range(i + 1, k, block):
            last = min(first + block, k)
            part = buffer[:last - first]
            np.subtract(rows[first:last], rows[i], out=part)
            np.abs(part, out=part)
            part /= safe[i, first:last, None]
            if zero[i, first:last].any():
                part[zero[i, first:last]] = 0.0
            np.maximum(worst, part.max(axis=0), out=worst)
    return worst
