"""equiv_f1: the harness's soft-matching F1 on normalised units (a second opinion, not the
published score), and per unit pair whether the two are equivalent but not equal."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lab.scoring.equiv.cache import MISSING, SizedCache
from lab.scoring.equiv.config import EquivConfig
from lab.scoring.equiv.pipeline import UNIT_OVERHEAD_CHARS, get_pipeline, side_chars
from lab.scoring.equiv.registry import EquivContext, EquivTooLarge
from lab.scoring.metrics import StepMetrics, score_batch
from lab.scoring.tokens import normalize_unit
from lab.tb2lite import CORRECTED

EQUIVALENT, CHAIN_PART = "equivalent", "chain_part"
LABEL = "equiv F1 (not the published score)"
SKIPPED = "equiv skipped: too large"
NEEDS_REPLAY = "equiv needs the replay"
_PROBE = EquivContext(cwd="/lab-probe/cwd", home="/lab-probe/home")


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


def too_large(pred_units: Sequence[str], ref_units: Sequence[str], config: EquivConfig | None = None) -> str | None:
    """"equiv skipped: too large (…)" when either side of a step is past the rules file's `limits`
    (units, characters in all, or characters of one unit), else None: such a step is not normalised."""
    limits = (config or get_pipeline(None).config).limits()
    max_units, max_chars, max_unit = limits["max_units"], limits["max_side_chars"], limits["max_unit_chars"]
    for side, units in (("pred", pred_units), ("ref", ref_units)):
        if len(units) > max_units:
            return f"{SKIPPED} ({len(units):,} {side} units; at most {max_units:,} a side)"
        chars = side_chars(units)
        if chars > max_chars:
            return f"{SKIPPED} ({chars:,} {side} characters; at most {max_chars:,} a side)"
        longest = max((len(u) for u in units if isinstance(u, str)), default=0)
        if longest > max_unit:
            return f"{SKIPPED} (a {side} unit of {longest:,} characters; at most {max_unit:,} a unit)"
    return None


def skip_reason(pred_units: Sequence[str], ref_units: Sequence[str], context: EquivContext | None = None,
                config: EquivConfig | None = None) -> str | None:
    """Why equiv_f1 leaves this step out ("equiv skipped: too large (…)"), or None when it does not:
    past the `limits` as given (`too_large`), or normalised units that would grow past them."""
    reason = too_large(pred_units, ref_units, config)
    if reason is not None:
        return reason
    pipeline = get_pipeline(config)
    for side, units in (("pred", pred_units), ("ref", ref_units)):
        try:
            pipeline.apply(units, context)
        except EquivTooLarge as exc:
            return f"{SKIPPED} (the {side} side's {exc})"
    return None


def depends_on_cwd(pred_units: Sequence[str], ref_units: Sequence[str], config: EquivConfig | None = None) -> bool:
    """Whether the step's normalised units change with the working directory (a relative `cd`, `cd ~`):
    without the step's screen (the replay) its equiv_f1 cannot be computed the way Compare does.
    True too when resolving them in some directory passes the limits (no number without the screen)."""
    pipeline = get_pipeline(config)
    try:
        return any([u.text for u in pipeline.apply(units, EquivContext(), True)]
                   != [u.text for u in pipeline.apply(units, _PROBE, True)] for units in (pred_units, ref_units))
    except EquivTooLarge:
        return True


FULL_MATCH = StepMetrics(1.0, 1.0, 1.0, 1.0)
# (scorer, config, pred, ref, cwd, home) -> the normalised metrics, None where no rule changed the step,
# TOO_LARGE where its normalised units pass the limits; bounded by the characters of the keys
SCORED_CACHE_CHARS = 1 << 23
_scored = SizedCache(SCORED_CACHE_CHARS)
TOO_LARGE = "too large"


def _normalised(pipeline, p: Sequence[str], r: Sequence[str], ctx: EquivContext | None):
    """Both sides' normalised unit texts (metrics rules only), or None when either passes the limits."""
    try:
        return [u.text for u in pipeline.apply(p, ctx, True)], [u.text for u in pipeline.apply(r, ctx, True)]
    except EquivTooLarge:
        return None


def equiv_batch(
    rows: Iterable[tuple[Sequence[str], Sequence[str], EquivContext | None]],
    harness: Sequence[StepMetrics | None] | None = None,
    scorer: str = CORRECTED,
    config: EquivConfig | None = None,
) -> list[EquivMetrics | None]:
    """equiv metrics of many (pred_units, ref_units, context) steps; None for a step past the
    per-step limits (`too_large`: never normalised, never guessed) or whose normalised units would
    grow past them (`skip_reason` says which).

    `harness`: the steps' published metrics where known (stored ones); the others are computed.
    The normalised units are scored with the harness's own `score_batch`, once per distinct
    (pred, ref, cwd, home) across calls: runs of one replay share most references and many
    predictions. A step the harness already scores F1 = 1 needs no rules (equiv can only forgive).
    """
    pipeline = get_pipeline(config)
    rows = list(rows)
    skip = [too_large(p, r, pipeline.config) is not None for p, r, _ in rows]
    base = list(harness) if harness is not None else [None] * len(rows)
    missing = [i for i, h in enumerate(base) if h is None and not skip[i]]
    for i, metrics in zip(missing, score_batch([(list(rows[i][0]), list(rows[i][1])) for i in missing], scorer)):
        base[i] = metrics
    keys: list[tuple | None] = []
    found: dict[tuple, object] = {}  # this call's answers (the shared cache may drop an entry meanwhile)
    todo: dict[tuple, tuple[list[str], list[str]]] = {}
    for (p, r, ctx), h, skipped in zip(rows, base, skip):
        if skipped or h.f1 >= 1.0:
            keys.append(None)
            continue
        key = (scorer, pipeline.config, tuple(p), tuple(r), ctx.cwd if ctx else None, ctx.home if ctx else None)
        keys.append(key)
        if key in found or key in todo:
            continue
        cached = _scored.get(key, MISSING)
        if cached is not MISSING:
            found[key] = cached
            continue
        norm = _normalised(pipeline, p, r, ctx)
        if norm is None:  # grew past the limits while normalised
            found[key] = TOO_LARGE
        elif norm == (list(p), list(r)):  # no rule changed it: it scores what the harness gave it
            found[key] = None
        elif norm[0] and norm[0] == norm[1]:  # the same units after the rules: a full match
            found[key] = FULL_MATCH
        else:
            todo[key] = norm
    found.update(zip(todo, score_batch(list(todo.values()), scorer)))
    for key, value in found.items():
        _scored.put(key, value, side_chars(key[2]) + side_chars(key[3]) + UNIT_OVERHEAD_CHARS * (len(key[2]) + len(key[3])))
    out: list[EquivMetrics | None] = []
    for key, h, skipped in zip(keys, base, skip):
        normalised = found.get(key) if key is not None else None
        if skipped or normalised is TOO_LARGE:
            out.append(None)
            continue
        out.append(better_of(h, normalised if normalised is not None else h))  # type: ignore[arg-type]
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
    """One step's equiv view: metrics, the normalised pieces per original unit, the context used;
    for a step past the limits, no metrics and `skipped` saying why (each unit is its own piece)."""

    metrics: EquivMetrics | None
    pred_pieces: list[tuple[str, ...]]
    ref_pieces: list[tuple[str, ...]]
    context: EquivContext
    skipped: str | None = None

    def pair(self, pred_units: Sequence[str], ref_units: Sequence[str], pred_index: int, ref_index: int) -> str | None:
        """The kind of the (pred unit, ref unit) pair: `equivalent`, `chain_part` or None."""
        return pair_kind(pred_units[pred_index], ref_units[ref_index],
                         self.pred_pieces[pred_index], self.ref_pieces[ref_index])


def equiv_step(
    pred_units: Sequence[str],
    ref_units: Sequence[str],
    context: EquivContext | None = None,
    harness: StepMetrics | None = None,
    scorer: str = CORRECTED,
    config: EquivConfig | None = None,
) -> EquivStep:
    """Everything equiv about one step (for Compare's diff and column)."""
    context = context or EquivContext()
    pipeline = get_pipeline(config)
    skipped = too_large(pred_units, ref_units, pipeline.config)
    if skipped is None:
        try:
            pred_norm, ref_norm = pipeline.apply(pred_units, context), pipeline.apply(ref_units, context)
        except EquivTooLarge:
            skipped = skip_reason(pred_units, ref_units, context, pipeline.config)
    if skipped is not None:
        return EquivStep(None, [(u,) for u in pred_units], [(u,) for u in ref_units], context, skipped)
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
