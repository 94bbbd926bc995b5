"""Per-step command metrics (SPEC §6): the straightforward scorer and a fast batch scorer.

`score_units` is the reference implementation, written as plainly as the rules. `score_batch`
gives bit-identical numbers for many steps at once: it dedupes identical steps, groups steps
that share a reference (the same replay step across runs), computes each distinct
(pred unit, ref unit) token F1 once with numpy, and keeps the final means as Python
`sum(list) / len` in the same order as `score_units`.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

try:  # keeps BLAS single-threaded for the many small matrix products of score_batch
    from threadpoolctl import ThreadpoolController
except ImportError:  # optional: without it the numbers are the same, only slower under load
    ThreadpoolController = None

from lab.scoring.tokens import normalize_unit, token_counts, unit_f1
from lab.tb2lite import CORRECTED, LEGACY

ROUND_DIGITS = 4


@dataclass(frozen=True)
class StepMetrics:
    """Stored per-step metrics: first_cmd_exact is 0.0/1.0, the rest rounded to 4 decimals."""

    first_cmd_exact: float
    precision: float
    recall: float
    f1: float

    def to_dict(self) -> dict[str, float]:
        """The per_step key names of the result schema."""
        return {
            "first_cmd_exact": self.first_cmd_exact,
            "command_precision": self.precision,
            "command_recall": self.recall,
            "command_f1": self.f1,
        }


@dataclass(frozen=True)
class ScorerRules:
    """What differs between the harness's scorers."""

    name: str
    both_empty: StepMetrics  # the score of an empty-pred, empty-ref step (SPEC §10.1)
    complete_true_needs_ref: bool  # pred_task_complete_true = pred and ref (else pred is True)


SCORERS: dict[str, ScorerRules] = {
    CORRECTED: ScorerRules(CORRECTED, StepMetrics(0.0, 0.0, 0.0, 0.0), complete_true_needs_ref=True),
    LEGACY: ScorerRules(LEGACY, StepMetrics(1.0, 1.0, 1.0, 1.0), complete_true_needs_ref=False),
}


def scorer_rules(scorer: str) -> ScorerRules:
    """The rules of a scorer by name; ValueError naming the known scorers otherwise."""
    try:
        return SCORERS[scorer]
    except KeyError:
        raise ValueError(f"unknown scorer {scorer!r}; choose one of {', '.join(SCORERS)}") from None


def finish_metrics(first_exact: bool, precision: float, recall: float) -> StepMetrics:
    """Round as stored; f1 comes from the unrounded precision and recall, then is rounded."""
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return StepMetrics(
        1.0 if first_exact else 0.0,
        round(precision, ROUND_DIGITS),
        round(recall, ROUND_DIGITS),
        round(f1, ROUND_DIGITS),
    )


def score_units(pred_units: Sequence[str], ref_units: Sequence[str], scorer: str = CORRECTED) -> StepMetrics:
    """Score one step: max-based soft matching of normalized units by token F1 (SPEC §6)."""
    rules = scorer_rules(scorer)
    pred = [normalize_unit(u) for u in pred_units]
    ref = [normalize_unit(u) for u in ref_units]
    if not pred and not ref:
        return rules.both_empty
    first_exact = bool(pred) and bool(ref) and pred[0].lower() == ref[0].lower()
    if not pred or not ref:
        return finish_metrics(first_exact, 0.0, 0.0)
    recall = sum(max(unit_f1(r, p) for p in pred) for r in ref) / len(ref)
    precision = sum(max(unit_f1(p, r) for r in ref) for p in pred) / len(pred)
    return finish_metrics(first_exact, precision, recall)


# ---------------------------------------------------------------- fast batch path


class _UnitTable:
    """Interns units: raw unit -> id of its normalized form; per id its token ids and counts."""

    def __init__(self) -> None:
        self.raw_ids: dict[str, int] = {}  # raw unit -> normalized unit id
        self.norm_ids: dict[str, int] = {}  # normalized unit -> id
        self.lower: list[str] = []  # per id: lower-cased normalized unit (first_cmd_exact)
        self.token_ids: dict[str, int] = {}
        self.tids: list[list[int]] = []  # per id: distinct token ids
        self.tcounts: list[list[int]] = []  # per id: their counts
        self.sizes: list[int] = []  # per id: number of tokens

    def ids(self, units: Sequence[str]) -> list[int]:
        """Ids of a unit list, interning the units not seen yet."""
        get = self.raw_ids.get
        ids = [get(u) for u in units]
        if None in ids:
            ids = [self._intern(u) if i is None else i for u, i in zip(units, ids)]
        return ids  # type: ignore[return-value]

    def _intern(self, raw: str) -> int:
        norm = normalize_unit(raw if isinstance(raw, str) else str(raw))
        uid = self.norm_ids.get(norm)
        if uid is None:
            uid = self.norm_ids[norm] = len(self.lower)
            self.lower.append(norm.lower())
            counts = token_counts(norm)
            tids = self.token_ids
            self.tids.append([tids.setdefault(t, len(tids)) for t in counts])
            self.tcounts.append(list(counts.values()))
            self.sizes.append(counts.total())
        self.raw_ids[raw] = uid
        return uid

    def count_matrix(self, units: list[int], vocab_lut: np.ndarray, n_vocab: int) -> np.ndarray:
        """Dense token-count rows of `units` over a vocabulary (lut: token id -> column or -1)."""
        flat_tids: list[int] = []
        flat_counts: list[int] = []
        lengths = []
        for u in units:
            t = self.tids[u]
            flat_tids += t
            flat_counts += self.tcounts[u]
            lengths.append(len(t))
        out = np.zeros((len(units), n_vocab), dtype=np.float32)
        if not flat_tids or not n_vocab:
            return out
        cols = vocab_lut[np.array(flat_tids, dtype=np.intp)]
        rows = np.repeat(np.arange(len(units)), lengths)
        keep = cols >= 0
        out[rows[keep], cols[keep]] = np.array(flat_counts, dtype=np.float32)[keep]
        return out


def _f1_matrix(table: _UnitTable, rows: list[int], cols: list[int]) -> np.ndarray:
    """Token F1 of every (row unit, col unit) pair, bit-identical to `unit_f1`.

    The multiset overlap is sum over k >= 1 of [count_a >= k]·[count_b >= k]: a few 0/1
    matrix products over the columns' vocabulary (float32 is exact for these small integer
    sums). The F1 then uses float64 and the same operations, in the same order, as
    `f1_from_overlap`.
    """
    col_tids = sorted({t for c in cols for t in table.tids[c]})
    lut = np.full(len(table.token_ids), -1, dtype=np.intp)
    lut[np.array(col_tids, dtype=np.intp)] = np.arange(len(col_tids))
    col_counts = table.count_matrix(cols, lut, len(col_tids))
    row_counts = table.count_matrix(rows, lut, len(col_tids))
    top = int(min(row_counts.max(initial=0), col_counts.max(initial=0)))
    overlap32 = np.zeros((len(rows), len(cols)), dtype=np.float32)
    for level in range(1, top + 1):
        overlap32 += (row_counts >= level).astype(np.float32) @ (col_counts >= level).astype(np.float32).T
    overlap = overlap32.astype(np.float64)
    n_rows = np.array([table.sizes[r] for r in rows], dtype=np.float64)[:, None]
    n_cols = np.array([table.sizes[c] for c in cols], dtype=np.float64)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = overlap / n_rows
        r = overlap / n_cols
        f1 = 2 * p * r / (p + r)
    f1 = np.where(overlap > 0, f1, 0.0)
    return np.where((n_rows == 0) & (n_cols == 0), 1.0, f1)


def _score_group(table: _UnitTable, ref_ids: list[int], pred_ids: list[list[int]]) -> list[StepMetrics]:
    """Score several non-empty predictions (unit ids) against one shared non-empty reference."""
    ref_cols = list(dict.fromkeys(ref_ids))
    col_of = {uid: j for j, uid in enumerate(ref_cols)}
    ref_expand = np.array([col_of[u] for u in ref_ids], dtype=np.intp)
    pred_rows = list(dict.fromkeys(uid for ids in pred_ids for uid in ids))
    row_of = {uid: i for i, uid in enumerate(pred_rows)}

    matrix = _f1_matrix(table, pred_rows, ref_cols)  # distinct pred units × distinct ref units
    row_index = np.array([row_of[u] for ids in pred_ids for u in ids], dtype=np.intp)
    # each pred unit's best F1 over the reference, for every unit of every prediction in order
    best_for_pred = matrix.max(axis=1)[row_index].tolist()
    offsets = np.cumsum([0] + [len(ids) for ids in pred_ids[:-1]])
    # per prediction, each ref unit's best F1 over that prediction's units, in ref order
    col_best = np.maximum.reduceat(matrix[row_index], offsets, axis=0)[:, ref_expand].tolist()

    first_ref = table.lower[ref_ids[0]]
    lower = table.lower
    n_ref = len(ref_ids)
    out: list[StepMetrics] = []
    start = 0
    for ids, best_for_ref in zip(pred_ids, col_best):
        end = start + len(ids)
        recall = sum(best_for_ref) / n_ref
        precision = sum(best_for_pred[start:end]) / len(ids)
        out.append(finish_metrics(lower[ids[0]] == first_ref, precision, recall))
        start = end
    return out


def f1_matrix(pred_units: Sequence[str], ref_units: Sequence[str]) -> np.ndarray:
    """Unrounded token F1 of every (pred, ref) pair (rows pred, cols ref), equal to `unit_f1`."""
    if not pred_units or not ref_units:
        return np.zeros((len(pred_units), len(ref_units)))
    table = _UnitTable()
    with single_threaded_blas():
        return _f1_matrix(table, table.ids(pred_units), table.ids(ref_units))


@functools.lru_cache(maxsize=1)
def _blas_controller():
    """The process's ThreadpoolController, made once (finding the libraries costs ~2 ms a call). numpy's
    BLAS is loaded before this module runs, so the controller made at the first score sees it."""
    return ThreadpoolController()


def single_threaded_blas():
    """Multi-threaded BLAS on small matrices costs several times more on a busy 2-core machine (and its
    spinning threads take the other core from everything else: the statistics run under it too)."""
    if ThreadpoolController is None:
        return contextlib.nullcontext()
    return _blas_controller().limit(limits=1, user_api="blas")


def score_batch(
    pairs: Iterable[tuple[Sequence[str], Sequence[str]]], scorer: str = CORRECTED
) -> list[StepMetrics]:
    """Score many (pred_units, ref_units) steps; equal, number for number, to `score_units`.

    Identical steps are scored once; steps sharing a reference are scored together from one
    matrix of distinct (pred unit, ref unit) token F1 values. Means are Python sums over the
    same values in the same order as `score_units`, so the floats are bit-identical.
    """
    rules = scorer_rules(scorer)
    table = _UnitTable()
    seen: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    distinct: list[StepMetrics | None] = []
    groups: dict[tuple[str, ...], tuple[list[int], list[tuple[int, list[int]]]]] = {}
    slots: list[int] = []
    for pred_units, ref_units in pairs:
        key = (tuple(pred_units), tuple(ref_units))
        slot = seen.get(key)
        if slot is None:
            slot = seen[key] = len(distinct)
            distinct.append(None)
            if not key[0] or not key[1]:
                both_empty = not key[0] and not key[1]
                distinct[slot] = rules.both_empty if both_empty else finish_metrics(False, 0.0, 0.0)
            else:
                group = groups.get(key[1])
                if group is None:
                    group = groups[key[1]] = (table.ids(key[1]), [])
                group[1].append((slot, table.ids(key[0])))
        slots.append(slot)

    with single_threaded_blas():
        for ref_ids, members in groups.values():
            scored = _score_group(table, ref_ids, [ids for _, ids in members])
            for (slot, _), metrics in zip(members, scored):
                distinct[slot] = metrics
    return [distinct[s] for s in slots]  # type: ignore[misc]
