"""equiv_f1: the harness's soft-matching F1 on normalised units (a second opinion, not the
published score), and per unit pair whether the two are equivalent but not equal."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lab.scoring.equiv.config import EquivConfig
from lab.scoring.equiv.pipeline import get_pipeline
from lab.scoring.equiv.registry import EquivContext
from lab.scoring.metrics import StepMetrics, score_batch
from lab.scoring.tokens import normalize_unit

EQUIVALENT, CHAIN_PART = "equivalent", "chain_part"
LABEL = "equiv F1 (not the published score)"


@dataclass(frozen=True)
class EquivMetrics:
    """A step's equiv precision/recall/F1 and the F1 the normalised units alone give.

    The equiv triple is the better (by F1) of the harness's and the normalised one: spelling can
    only be forgiven, and a lower normalised F1 comes from re-cutting units (a chain split into
    several changes the means), not from spelling. So equiv_f1 >= F1 on every step.
    `normalised_f1` is informative only (equiv_batch does not rescore a step the harness already
    scores 1.0, and gives it 1.0): it takes no part in comparisons.
    """

    precision: float
    recall: float
    f1: float
    normalised_f1: float = field(compare=False)

    def to_dict(self) -> dict[str, float]:
        return {"equiv_precision": self.precision, "equiv_recall": self.recall, "equiv_f1": self.f1}


def better_of(harness: StepMetrics, normalised: StepMetrics) -> EquivMetrics:
    """The equiv metrics from the harness's and the normalised metrics of one step."""
    best = normalised if normalised.f1 > harness.f1 else harness
    return EquivMetrics(best.precision, best.recall, best.f1, normalised.f1)


FULL_MATCH = StepMetrics(1.0, 1.0, 1.0, 1.0)
SCORED_CACHE = 1 << 18  # (scorer, config, pred, ref, cwd, home) -> the normalised metrics
_scored: dict[tuple, StepMetrics | None] = {}


def equiv_batch(
    rows: Iterable[tuple[Sequence[str], Sequence[str], EquivContext | None]],
    harness: Sequence[StepMetrics | None] | None = None,
    scorer: str = "corrected",
    config: EquivConfig | None = None,
) -> list[EquivMetrics]:
    """equiv metrics of many (pred_units, ref_units, context) steps.

    `harness`: the steps' published metrics where known (stored ones); the others are computed.
    The normalised units are scored with the harness's own `score_batch`, once per distinct
    (pred, ref, cwd, home) across calls: runs of one replay share most references and many
    predictions. A step the harness already scores F1 = 1 needs no rules (equiv can only forgive).
    """
    pipeline = get_pipeline(config)
    rows = list(rows)
    base = list(harness) if harness is not None else [None] * len(rows)
    missing = [i for i, h in enumerate(base) if h is None]
    for i, metrics in zip(missing, score_batch([(list(rows[i][0]), list(rows[i][1])) for i in missing], scorer)):
        base[i] = metrics
    if len(_scored) >= SCORED_CACHE:
        _scored.clear()
    keys: list[tuple | None] = []
    todo: dict[tuple, tuple[list[str], list[str]]] = {}
    for (p, r, ctx), h in zip(rows, base):
        if h.f1 >= 1.0:
            keys.append(None)
            continue
        key = (scorer, pipeline.config, tuple(p), tuple(r), ctx.cwd if ctx else None, ctx.home if ctx else None)
        keys.append(key)
        if key in _scored or key in todo:
            continue
        norm = ([u.text for u in pipeline.apply(p, ctx, True)], [u.text for u in pipeline.apply(r, ctx, True)])
        if norm == (list(p), list(r)):  # no rule changed it: it scores what the harness gave it
            _scored[key] = None
        elif norm[0] and norm[0] == norm[1]:  # the same units after the rules: a full match
            _scored[key] = FULL_MATCH
        else:
            todo[key] = norm
    _scored.update(zip(todo, score_batch(list(todo.values()), scorer)))
    out = []
    for key, h in zip(keys, base):
        normalised = _scored.get(key) if key is not None else None
        out.append(better_of(h, normalised if normalised is not None else h))
    return out


def pair_kind(pred_unit: str, ref_unit: str, pred_pieces: Sequence[str], ref_pieces: Sequence[str]) -> str | None:
    """`equivalent` when two different units normalise alike; `chain_part` when one's normalised
    units are a run inside the other's (`a && b` vs `b`); None when equal or not equivalent."""
    if normalize_unit(pred_unit) == normalize_unit(ref_unit):
        return None
    p = tuple(normalize_unit(x) for x in pred_pieces)
    r = tuple(normalize_unit(x) for x in ref_pieces)
    if not p or not r:
        return None
    if p == r:
        return EQUIVALENT
    short, long_ = (p, r) if len(p) < len(r) else (r, p)
    if any(long_[i:i + len(short)] == short for i in range(len(long_) - len(short) + 1)):
        return CHAIN_PART
    return None


@dataclass(frozen=True)
class EquivStep:
    """One step's equiv view: metrics, the normalised pieces per original unit, the context used."""

    metrics: EquivMetrics
    pred_pieces: list[tuple[str, ...]]
    ref_pieces: list[tuple[str, ...]]
    context: EquivContext

    def pair(self, pred_units: Sequence[str], ref_units: Sequence[str], pred_index: int, ref_index: int) -> str | None:
        """The kind of the (pred unit, ref unit) pair: `equivalent`, `chain_part` or None."""
        return pair_kind(pred_units[pred_index], ref_units[ref_index],
                         self.pred_pieces[pred_index], self.ref_pieces[ref_index])


def equiv_step(
    pred_units: Sequence[str],
    ref_units: Sequence[str],
    context: EquivContext | None = None,
    harness: StepMetrics | None = None,
    scorer: str = "corrected",
    config: EquivConfig | None = None,
) -> EquivStep:
    """Everything equiv about one step (for Compare's diff and column)."""
    context = context or EquivContext()
    pipeline = get_pipeline(config)
    pred_norm, ref_norm = pipeline.apply(pred_units, context), pipeline.apply(ref_units, context)
    pred_pieces: list[list[str]] = [[] for _ in pred_units]
    ref_pieces: list[list[str]] = [[] for _ in ref_units]
    for u in pred_norm:
        pred_pieces[u.origin].append(u.text)
    for u in ref_norm:
        ref_pieces[u.origin].append(u.text)
    raw = (list(pred_units), list(ref_units))
    norm = ([u.text for u in pred_norm], [u.text for u in ref_norm])
    harness = harness if harness is not None else score_batch([raw], scorer)[0]
    normalised = harness if norm == raw else score_batch([norm], scorer)[0]
    metrics = better_of(harness, normalised)
    return EquivStep(metrics, [tuple(p) for p in pred_pieces], [tuple(r) for r in ref_pieces], context)
