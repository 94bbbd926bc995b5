"""Command-level alignment of a step's predicted and reference units (for diffs and heatmaps).

Matching is the scorer's max-based soft matching (SPEC §6), not a one-to-one assignment:
each unit points at its best counterpart, several units may point at the same one, and a
unit whose best token F1 is 0 is unmatched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from lab.scoring.metrics import StepMetrics, score_units
from lab.scoring.tokens import normalize_unit, unit_f1


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
    pred = [normalize_unit(u) for u in pred_units]
    ref = [normalize_unit(u) for u in ref_units]
    return [[unit_f1(p, r) for r in ref] for p in pred]


def _best(scores: list[float]) -> tuple[int | None, float]:
    """First index of the maximum; None when the maximum is 0 (or there is nothing)."""
    if not scores:
        return None, 0.0
    best = max(range(len(scores)), key=scores.__getitem__)
    return (best if scores[best] > 0 else None), scores[best]


def align_units(pred_units: Sequence[str], ref_units: Sequence[str], scorer: str = "corrected") -> Alignment:
    """Best counterpart of every ref unit and every pred unit, with the step's metrics."""
    matrix = similarity_matrix(pred_units, ref_units)
    pred_side = []
    for i, row in enumerate(matrix):
        j, f1 = _best(row)
        pred_side.append(UnitMatch(i, pred_units[i], j, f1))
    ref_side = []
    for j, text in enumerate(ref_units):
        i, f1 = _best([row[j] for row in matrix])
        ref_side.append(UnitMatch(j, text, i, f1))
    return Alignment(ref=ref_side, pred=pred_side, metrics=score_units(pred_units, ref_units, scorer))
