"""Compare's equiv_f1 parts: per diff row whether the pair is equivalent but not equal, and the
column's equiv F1 next to the harness F1 (not the published score). Metrics come from
`lab.scoring.equiv`; this module only shapes and renders them."""
from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Sequence

from lab.data.step import Step
from lab.scoring.equiv import CHAIN_PART, EQUIVALENT, LABEL, SKIPPED, equiv_step, step_context

BADGE_TEXT = {EQUIVALENT: "≡ equivalent", CHAIN_PART: "≡ part of a chain"}
BADGE_TITLE = {
    EQUIVALENT: "written differently, the same command after the equiv rules (lab/scoring/equiv_rules.yaml)",
    CHAIN_PART: "the same command as one part of the other side's && / ; chain",
}


@dataclass(frozen=True)
class EquivSummary:
    """A column's equiv metrics, the working directory `cd` was resolved against, and the gap."""

    precision: float | None
    recall: float | None
    f1: float | None
    harness_f1: float
    cwd: str | None
    skipped: str | None = None  # "equiv skipped: too large (…)": no equiv metrics for this step

    @property
    def gap(self) -> float:
        return round((self.f1 or 0.0) - self.harness_f1, 4)


def annotate_equiv(view: Any, step: Step | None, ref_units: Sequence[str], harness: Any) -> None:
    """Set `view.equiv` and each diff row's `equiv` kind (rows: lab.ui.compare.step_view.UnitMatch)."""
    pred_units = list(view.pred_units)
    ref_units = list(ref_units)
    context = step_context(step) if step is not None else None
    result = equiv_step(pred_units, ref_units, context, harness=harness)
    m = result.metrics
    harness_f1 = float(view.metrics.get("command_f1", 0.0))
    if m is None:
        view.equiv = EquivSummary(None, None, None, harness_f1, result.context.cwd, result.skipped)
        return
    view.equiv = EquivSummary(m.precision, m.recall, m.f1, harness_f1, result.context.cwd)
    for row in view.ref_rows:
        if row.other_index is not None:
            row.equiv = result.pair(pred_units, ref_units, row.other_index, row.index)
    for row in view.pred_rows:
        if row.other_index is not None:
            row.equiv = result.pair(pred_units, ref_units, row.index, row.other_index)


def equiv_badge(kind: str | None) -> str:
    """The small badge of an equivalent-but-not-equal pair ('' for none)."""
    if kind not in BADGE_TEXT:
        return ""
    return (f' <span class="lab-equiv-badge" data-equiv="{escape(kind)}" title="{escape(BADGE_TITLE[kind])}">'
            f"{escape(BADGE_TEXT[kind])}</span>")


def render_equiv_metric(summary: EquivSummary | None) -> str:
    """equiv F1 beside the harness F1, labelled as not the published score."""
    if summary is None:
        return ""
    if summary.skipped is not None or summary.f1 is None:
        return (f'<div class="lab-equiv" data-metric="equiv F1" data-equiv-skipped="1" title="{escape(LABEL)}: '
                f'lab/scoring/equiv_rules.yaml bounds the work per step (limits)"><span>{escape(LABEL)}</span> '
                f'<span class="lab-muted">{escape(summary.skipped or SKIPPED)}</span></div>')
    cwd = f" · cd resolved in {escape(summary.cwd)}" if summary.cwd else " · working directory unknown"
    gap = f"+{summary.gap:.4f}" if summary.gap > 0 else "±0"
    return (
        f'<div class="lab-equiv" data-metric="equiv F1" title="{escape(LABEL)}: the harness F1 after the rules of '
        f'lab/scoring/equiv_rules.yaml{escape(cwd)}"><span>{escape(LABEL)}</span> '
        f"<b>{summary.f1:.4f}</b> <span class=\"lab-muted\">P {summary.precision:.4f} · R {summary.recall:.4f} · "
        f"spelling gap {gap}</span></div>"
    )
