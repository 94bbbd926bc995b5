"""Command-level alignment of a step's predicted and reference units (for diffs and heatmaps).

Matching is the scorer's max-based soft matching (SPEC §6), not a one-to-one assignment:
each unit points at its best counterpart, several units may point at the same one, and a
unit whose best token F1 is 0 is unmatched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from lab.scoring.metrics import StepMetrics, f1_matrix, score_batch
from lab.tb2lite import CORRECTED


@dataclass(frozen=True)
class UnitMatch:
    """One unit and its best counterpart on the other side (None when nothing overlaps)."""

    index: int
    text: str
    best_index: int | None
    f1: float

    @property
    def matched(self) -> bool:
        return self.best_index is not None


@dataclass(frozen=True)
class Alignment:
    """Per ref unit and per pred unit best matches, plus the step's stored metrics."""

    ref: list[UnitMatch]
    pred: list[UnitMatch]
    metrics: StepMetrics

    def to_dict(self) -> dict:
        return {"ref": [asdict(m) for m in self.ref], "pred": [asdict(m) for m in self.pred],
                "metrics": self.metrics.to_dict()}


def similarity_matrix(pred_units: Sequence[str], ref_units: Sequence[str]) -> list[list[float]]:
    """Unrounded token F1 of every (pred, ref) pair of normalized units: rows pred, cols ref."""
    return f1_matrix(list(pred_units), list(ref_units)).tolist()


def _best_along(matrix: np.ndarray, axis: int) -> list[tuple[int | None, float]]:
    """Per row (axis=1) or column (axis=0): first index of the maximum, None when it is 0."""
    if matrix.size == 0:
        return [(None, 0.0)] * matrix.shape[1 - axis]
    idx = matrix.argmax(axis=axis).tolist()  # argmax returns the first maximum, as max() does
    best = matrix.max(axis=axis).tolist()
    return [(i if f > 0 else None, f) for i, f in zip(idx, best)]


def align_units(pred_units: Sequence[str], ref_units: Sequence[str], scorer: str = CORRECTED) -> Alignment:
    """Best counterpart of every ref unit and every pred unit, with the step's metrics."""
    pred_units, ref_units = list(pred_units), list(ref_units)
    matrix = f1_matrix(pred_units, ref_units)
    pred_side = [UnitMatch(i, pred_units[i], j, f1) for i, (j, f1) in enumerate(_best_along(matrix, 1))]
    ref_side = [UnitMatch(j, ref_units[j], i, f1) for j, (i, f1) in enumerate(_best_along(matrix, 0))]
    return Alignment(ref=ref_side, pred=pred_side, metrics=score_batch([(pred_units, ref_units)], scorer)[0])
