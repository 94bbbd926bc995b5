"""The max-T statistic of every pair of k runs judged together (lab.scoring.ranking): per bootstrap resample,
the largest studentized difference over all k(k−1)/2 pairs, and its quantile (the intervals' critical value).
All pairs of a thousand runs over 10,000 resamples are 5·10⁹ ratios; the quantile needs only the resamples at
and above it, and bounds on blocks of runs rule out most pairs of most resamples (critical_value): the same
float from a few per cent of the ratios."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCK = 16  # runs per block of critical_value's bounds


def worst_pairs(dev: np.ndarray, se: np.ndarray, chunk_values: int) -> np.ndarray:
    """Per resample: the largest |devⱼ − devᵢ| / seᵢⱼ over the pairs i < j with seᵢⱼ > 0 (0 when none), run by
    run against the runs after it, so a thousand runs never hold their million pairs at once. Every pair of
    every resample: what critical_value is held to, and its path for numbers that are not finite."""
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


def critical_value(dev: np.ndarray, se: np.ndarray, level: float, chunk_values: int, block: int = BLOCK) -> float:
    """`np.quantile(worst_pairs(dev, se, …), level)`, the same float, from a small part of the pairs.

    Only the resamples at the quantile and above need their exact maximum; the others only need to be known to
    lie below it. The runs go in blocks of `block`; per resample, a block pair's largest ratio is at most
    (the one block's highest deviation − the other's lowest) / the pair's smallest se, and a run's against a
    block at most (its deviation against the block's extremes) / its smallest se there. Floating-point
    rounding is monotone, so these bounds hold for the computed ratios too. A bound below the threshold (the
    quantile's order statistic of the exact maxima found so far: at or below the true one), or not above the
    resample's own maximum so far, skips that block pair or run for that resample; the rest is computed as
    worst_pairs computes it. Every resample whose maximum reaches the final threshold then has its exact
    maximum and every other lies below it, so the order statistics the quantile reads are worst_pairs' own."""
    resamples, k = dev.shape
    if resamples == 0 or k < 2 or not (np.isfinite(dev).all() and np.isfinite(se).all()):
        return float(np.quantile(worst_pairs(dev, se, chunk_values), level))
    pairs = _Pairs.of(dev, se, block, chunk_values)
    at = max(0, int(np.floor((resamples - 1) * level)) - 1)  # at or below the quantile's lower order statistic
    found, floor = np.zeros(resamples), np.full(resamples, -np.inf)
    pairs.sweep(found, floor, at)
    return float(np.quantile(found, level))


@dataclass(frozen=True)
class _Pairs:
    """The runs in blocks: per resample each block's highest and lowest deviation, and the smallest se of each
    run against each block and of each block pair (seᵢⱼ of i < j for both orders, as worst_pairs reads it)."""

    dev: np.ndarray
    safe: np.ndarray           # (runs, runs) se, 1 where a pair does not count
    zero: np.ndarray           # (runs, runs) the pairs that do not count (se ≤ 0, a run with itself)
    blocks: list[slice]
    high: np.ndarray           # (blocks, resamples)
    low: np.ndarray
    nearest: np.ndarray        # (runs, blocks)
    smallest: np.ndarray       # (blocks, blocks)
    chunk_values: int

    @classmethod
    def of(cls, dev: np.ndarray, se: np.ndarray, block: int, chunk_values: int) -> "_Pairs":
        k = dev.shape[1]
        se = np.where(np.triu(np.ones((k, k), dtype=bool), 1), se, se.T)
        zero = ~(se > 0)
        np.fill_diagonal(zero, True)
        starts = np.arange(0, k, block)
        nearest = np.minimum.reduceat(np.where(zero, np.inf, se), starts, axis=1)
        return cls(dev, np.where(zero, 1.0, se), zero, [slice(s, min(s + block, k)) for s in starts],
                   np.maximum.reduceat(dev, starts, axis=1).T, np.minimum.reduceat(dev, starts, axis=1).T,
                   nearest, np.minimum.reduceat(nearest, starts, axis=0), chunk_values)

    def sweep(self, found: np.ndarray, floor: np.ndarray, at: int) -> None:
        """Raise `found` to each resample's maximum where it can reach the threshold; `floor`: per resample, the
        bound it takes to matter (above its maximum so far, at or above the threshold)."""
        done = 0
        for a in range(len(self.blocks)):
            bound = np.maximum(self.high[a:] - self.low[a], self.high[a] - self.low[a:])  # (blocks b ≥ a, resamples)
            bound /= self.smallest[a, a:, None]
            for b, row in enumerate(bound, start=a):
                open_ = np.flatnonzero(row > floor)
                if not len(open_) or not np.isfinite(self.smallest[a, b]):
                    continue
                self._block_pair(open_, a, b, found, floor)
                done += 1
                if done % 4 == 0:
                    threshold = np.nextafter(np.partition(found, at)[at], -np.inf)
                    np.maximum(floor, threshold, out=floor)

    def _block_pair(self, open_: np.ndarray, a: int, b: int, found: np.ndarray, floor: np.ndarray) -> None:
        """Raise `found` at the resamples `open_` to the largest ratio of a run of block a with one of block b,
        skipping each run of a whose bound against block b's extremes cannot matter."""
        cols_a, cols_b = self.blocks[a], self.blocks[b]
        dev_a = self.dev[open_, cols_a]
        bound = np.maximum(self.high[b, open_, None] - dev_a, dev_a - self.low[b, open_, None])
        bound /= self.nearest[cols_a, b]
        row, run = np.nonzero(bound > floor[open_, None])
        safe, zero = self.safe[cols_a, cols_b], self.zero[cols_a, cols_b]
        step = max(1, self.chunk_values // max(cols_b.stop - cols_b.start, 1))
        for first in range(0, len(row), step):
            r, i = open_[row[first:first + step]], run[first:first + step]
            part = self.dev[r, cols_b] - dev_a[row[first:first + step], i, None]
            np.abs(part, out=part)
            part /= safe[i]
            part[zero[i]] = 0.0
            np.maximum.at(found, r, part.max(axis=1))
        floor[open_] = np.maximum(floor[open_], found[open_])
