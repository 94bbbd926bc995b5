"""The view model of one Compare step: context, one column per engine, diffs and the F1 gap.

Pure functions over lab types (Step, StepResult, ParsedAction): no Gradio, no HTML, no scoring
of its own (metrics come from the pipeline, alignments from `lab.scoring.align`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from lab.data import StepContext, split_context
from lab.data.step import Step
from lab.engines.context import prompt_budget
from lab.engines.registry import engine_class
from lab.prompts.audit import TemplateAudit
from lab.scoring.action import ParsedAction

# view states of an engine column
READY, PENDING, RUNNING, LOADING, FAILED, ERROR = "ready", "pending", "running", "loading", "failed", "error"
ABSENT = "absent"  # a stored run without this step ("not in this run")
CRASHED = "crashed"  # a managed server that died after it was ready


@dataclass
class UnitMatch:
    """One row of the command-level diff: a unit and its best counterpart (None when unmatched)."""

    index: int
    unit: str
    other_index: int | None
    other_unit: str | None
    f1: float
    equiv: str | None = None  # equivalent but not equal (lab.scoring.equiv): "equivalent" | "chain_part"

    @property
    def matched(self) -> bool:
        return self.other_index is not None and self.f1 > 0.0


@dataclass
class EngineView:
    """One engine's column for one step."""

    spec: str
    name: str
    state: str = PENDING
    error: str | None = None
    kind: str = ""
    prompt_text: str = ""
    prompt_status: str | None = None
    prompt_error: str | None = None
    prompt_tokens: int | None = None
    raw_output: str = ""
    finish_reason: str | None = None
    latency_s: float | None = None
    ttft_s: float | None = None
    completion_tokens: int | None = None
    stored: bool = False
    parsed: ParsedAction | None = None
    pred_units: list[str] = field(default_factory=list)
    metrics: dict[str, float] | None = None
    ref_rows: list[UnitMatch] = field(default_factory=list)
    pred_rows: list[UnitMatch] = field(default_factory=list)
    equiv: Any = None  # lab.ui.compare.equiv_view.EquivSummary: equiv_f1, not the published score
    logprobs: Any = None  # lab.engines.logprobs.TokenLogprobs of the answer (None: not recorded)
    logprobs_error: str | None = None  # why they are not recorded, where they were asked for and malformed
    parting: Any = None  # lab.ui.compare.confidence.Parting: where this answer parts from the first other column's
    live: Any = None  # lab.engines.progress.ProgressSnapshot while generating: elapsed time, tokens so far
    ref_nll: Any = None  # lab.ui.compare.reference_nll.ReferenceNll: the reference answer's NLL per token under this engine

    @property
    def f1(self) -> float | None:
        return None if self.metrics is None else self.metrics.get("command_f1")

    @property
    def unmatched_pred(self) -> list[UnitMatch]:
        return [row for row in self.pred_rows if not row.matched]

    @property
    def tokens_per_s(self) -> float | None:
        """Completion tokens per second of this answer (None when either is unknown)."""
        if not self.completion_tokens or not self.latency_s:
            return None
        return self.completion_tokens / self.latency_s


@dataclass
class F1Gap:
    """The engines' F1s side by side; `best`/`worst` name the pair with the largest gap."""

    scores: list[tuple[str, float]]
    best: str | None
    worst: str | None
    gap: float
    latency: dict[str, float | None] = field(default_factory=dict)  # engine name -> latency_s
    tie: bool = False  # two or more engines, all with the same F1: no gap to show


@dataclass
class StepView:
    """Everything Compare shows for one step."""

    step: Step
    context: StepContext
    ref_raw: str
    ref_parsed: ParsedAction | None
    engines: list[EngineView]
    f1_gap: F1Gap


def alignment_rows(pred_units: list[str], ref_units: list[str]) -> tuple[list[UnitMatch], list[UnitMatch]]:
    """(rows per reference unit, rows per predicted unit) from `lab.scoring.align.align_units`."""
    from lab.scoring.align import align_units

    alignment = align_units(pred_units, ref_units)
    ref_rows = [
        UnitMatch(m.index, m.text, m.best_index, pred_units[m.best_index] if m.matched else None, float(m.f1))
        for m in alignment.ref
    ]
    pred_rows = [
        UnitMatch(m.index, m.text, m.best_index, ref_units[m.best_index] if m.matched else None, float(m.f1))
        for m in alignment.pred
    ]
    return ref_rows, pred_rows


def metrics_dict(metrics: Any) -> dict[str, float]:
    """StepMetrics (or a per_step row) as {first_cmd_exact, command_precision, command_recall, command_f1}."""
    if hasattr(metrics, "to_dict"):
        metrics = metrics.to_dict()
    keys = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")
    return {k: float(metrics[k]) for k in keys if k in metrics}


REFERENCE_PROMPT_STATUS = "not sent (the reference answers without a model)"


def _recorded_status(row: dict) -> str:
    status = row.get("template_status")
    return str(status) if status else "not recorded"


def engine_view_from_result(spec: str, name: str, result: Any, kind: str = "") -> EngineView:
    """Shape a pipeline StepResult into a column (an engine error becomes an error column)."""
    completion = result.completion
    prompt = result.prompt
    reference = engine_class(kind).answers_reference
    view = EngineView(
        spec=spec,
        name=name,
        kind=kind,
        prompt_text=prompt.text,
        # a stored run shows what it recorded, not the lab's re-render of the prompt without its tokenizer;
        # the reference answers without a model: no prompt is sent, so no template can fail
        prompt_status=(_recorded_status(completion.stored) if completion.stored is not None
                       else REFERENCE_PROMPT_STATUS if reference else prompt.status),
        prompt_error=None if completion.stored is not None or reference else prompt.error,
        prompt_tokens=completion.prompt_tokens if completion.prompt_tokens is not None else prompt.n_tokens,
        raw_output=completion.text or "",
        finish_reason=completion.finish_reason,
        latency_s=completion.latency_s,
        ttft_s=completion.ttft_s,
        completion_tokens=completion.completion_tokens,
        stored=completion.stored is not None or completion.command_units is not None,
        logprobs=completion.logprobs,
        logprobs_error=completion.logprobs_error,
    )
    if completion.absent:
        view.state, view.error = ABSENT, "this run has no answer for this step; its aggregate covers only the steps it answered"
        return view
    if completion.error:
        view.state, view.error = ERROR, completion.error
        return view
    view.state = READY
    view.parsed = result.parsed
    view.pred_units = list(result.parsed.command_units)
    view.metrics = metrics_dict(result.metrics)
    view.ref_rows, view.pred_rows = alignment_rows(view.pred_units, list(result.ref_parsed.command_units))
    from lab.ui.compare.equiv_view import annotate_equiv

    annotate_equiv(view, result.step, result.ref_parsed.command_units, result.metrics)
    return view


def engine_view_state(spec: str, name: str, state: str, error: str | None = None, kind: str = "") -> EngineView:
    """A column with no answer yet: pending, running, loading, failed (with the reason) or error."""
    return EngineView(spec=spec, name=name, state=state, error=error, kind=kind)


def f1_gap(engines: Sequence[EngineView]) -> F1Gap:
    """The engines' F1s and the pair (best, worst) with the largest gap; when every F1 is the same (to the 4
    decimals shown) there is no gap and no pair: `tie` is set and `worst` is None."""
    scores = [(e.name, e.f1) for e in engines if e.f1 is not None]
    if not scores:
        return F1Gap([], None, None, 0.0)
    latency = {e.name: e.latency_s for e in engines if e.f1 is not None}
    best = max(scores, key=lambda s: s[1])
    worst = min(scores, key=lambda s: s[1])
    if len(scores) < 2:
        return F1Gap(scores, best[0], None, 0.0, latency)
    gap = round(best[1] - worst[1], 4)
    if round(best[1], 4) == round(worst[1], 4):
        return F1Gap(scores, None, None, 0.0, latency, tie=True)
    return F1Gap(scores, best[0], worst[0], gap, latency)


# states of a column's prompt audit
AUDIT_PENDING, AUDIT_DISPLAY_ONLY, AUDIT_VERBATIM, AUDIT_TEMPLATE, AUDIT_ERROR = (
    "pending", "display_only", "verbatim", "template", "error")
DIFF_CONTEXT = 60


@dataclass
class AuditView:
    """A column's prompt audit, compact enough to cache per (engine, step): template status, the
    model's own template, token counts, the context budget and where a cut would fall."""

    state: str
    status: str | None = None
    error: str | None = None
    n_chars: int = 0
    n_tokens: int | None = None
    own_n_tokens: int | None = None
    own_error: str | None = None
    matches_own: bool | None = None
    first_difference: int | None = None
    lab_snippet: str = ""
    own_snippet: str = ""
    max_model_len: int | None = None
    max_tokens: int | None = None
    fits: bool | None = None
    rejects: bool = False  # the engine refuses an over-long prompt instead of cutting it
    overlong: str = "truncate"  # truncate | reject | shorten (lab.prompts.audit.context_verdict)
    refused: bool | None = None  # this prompt gets no answer (vLLM's 400, or the lab's guard)
    allowed_tokens: int | None = None  # new tokens the engine generates at most for this prompt
    special_added: int | None = None  # special tokens the engine adds (included in n_tokens)
    doubled_bos: bool = False  # the template starts with BOS and the engine adds another
    cut_side: str | None = None
    cut_token: int | None = None
    cut_char: int | None = None
    cut_tokens: int | None = None
    cut_chars: int | None = None
    cut_lines: int | None = None
    cut_preview: list[str] = field(default_factory=list)
    model: str = ""  # the engine's architecture · context · dtype (lab.engines.model_facts)
    preset: str | None = None
    flags: list[str] | None = None  # a managed server's flags (None for a public visitor)
    preset_changes: list | None = None  # what the preset sets vs no preset (lab.engines.preset_changes)
    preset_warning: str | None = None  # the checkpoint is not of the preset's family

    @property
    def budget(self) -> int | None:
        """Prompt tokens allowed (lab.engines.context.prompt_budget: max_model_len - max_tokens)."""
        if self.max_model_len is None or self.max_tokens is None:
            return None
        return prompt_budget(self.max_model_len, self.max_tokens)


def snippet_at(text: str, index: int, width: int = DIFF_CONTEXT) -> str:
    """`width` characters of `text` either side of `index` (what the first difference looks like)."""
    return text[max(0, index - width): index + width]


def audit_view_from(audit: TemplateAudit, verbatim: bool = False, preview_chars: int = 240) -> AuditView:
    """Shape a `lab.prompts.audit.TemplateAudit` (or, for a verbatim contract prompt, the same
    fields with no own template) into an AuditView; long preview lines are cut to `preview_chars`."""
    rendered, cut = audit.rendered, audit.truncation
    view = AuditView(
        state=AUDIT_VERBATIM if verbatim else AUDIT_TEMPLATE,
        status=rendered.status,
        error=rendered.error,
        n_chars=len(rendered.text),
        n_tokens=rendered.n_tokens,
        own_n_tokens=audit.own_n_tokens,
        own_error=audit.own_error,
        matches_own=audit.matches_own,
        first_difference=audit.first_difference,
        max_model_len=audit.max_model_len,
        max_tokens=audit.max_tokens,
        fits=audit.fits,
        rejects=audit.overlong in ("reject", "shorten"),
        overlong=audit.overlong,
        refused=audit.refused,
        allowed_tokens=audit.allowed_tokens,
        special_added=audit.special_added,
        doubled_bos=audit.doubled_bos,
    )
    if audit.first_difference is not None and audit.own_text is not None:
        view.lab_snippet = snippet_at(rendered.text, audit.first_difference)
        view.own_snippet = snippet_at(audit.own_text, audit.first_difference)
    if cut is not None:
        view.cut_side, view.cut_char, view.cut_tokens = cut.side, cut.cut_char, cut.cut_tokens
        view.cut_token = cut.n_tokens - cut.cut_tokens if cut.side == "right" else cut.cut_tokens
        view.cut_chars, view.cut_lines = cut.cut_chars, cut.cut_line_count
        view.cut_preview = [line[:preview_chars] for line in cut.cut_preview]
        if view.fits is None:
            view.fits = False
    return view


def build_step_view(step: Step, engines: list[EngineView], ref_parsed: ParsedAction | None = None) -> StepView:
    """Assemble the view of one step from its engine columns."""
    return StepView(
        step=step,
        context=split_context(step),
        ref_raw=step.ref_raw,
        ref_parsed=ref_parsed,
        engines=engines,
        f1_gap=f1_gap(engines),
    )
