"""The reference answer's likelihood beside a Compare column's F1: for a live engine one teacher-forced
prefill of its own prompt + the recorded reply (lab.engines.reference_likelihood); for a stored run the
store's `step_reference` (its model's newest score-reference run). Never 0 where nothing was measured."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lab.data.step import Step
from lab.workspace import EngineEntry, LabContext
from lab.ui.shell.html_text import esc, fmt

NOT_RECORDED = "not recorded"


@dataclass
class ReferenceNll:
    """One column's reference NLL per token (None: not recorded, `why` says why)."""

    nll_per_token: float | None = None
    tokens: int | None = None
    source: str = ""  # "scored now" or "score-reference run"
    why: str | None = None


def needs_reference_prefill(entry: EngineEntry) -> bool:
    """Whether `entry`'s reference likelihood takes a forward pass (a live model), not a store lookup."""
    return entry.engine is not None and entry.engine.scores_reference


def reference_nll(ctx: LabContext, entry: EngineEntry, step: Step, prompt_text: str) -> ReferenceNll:
    """The reference NLL per token of `step` under `entry`'s engine (never raises)."""
    engine = entry.engine
    if not step.ref_raw:
        return ReferenceNll(why="the step has no recorded reply")
    if needs_reference_prefill(entry):
        try:
            score = engine.score_reference(prompt_text, step.ref_raw)
        except Exception as exc:  # noqa: BLE001 - an engine that cannot score says so in its column
            return ReferenceNll(why=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
        if score.error or score.nll_per_token is None:
            return ReferenceNll(why=(score.error or "no reference tokens").splitlines()[0][:200])
        return ReferenceNll(score.nll_per_token, len(score.logprobs), "scored now")
    path = entry.stored_path
    run_id = ctx.stored_run_id(path) if path is not None else None
    if run_id is None:
        return ReferenceNll(why="no score-reference run of this model" if entry.traits.stored_run else None)
    try:
        df = ctx.query("SELECT ref_nll_per_token, ref_tokens FROM step_reference WHERE run_id = ? AND step_key = ?",
                       [run_id, step.key])
    except Exception:  # noqa: BLE001 - a store without the view (an old file) records nothing
        df = None
    if df is None or df.empty:
        return ReferenceNll(why="no score-reference run of this model for this step")
    nll, tokens = df.iloc[0]["ref_nll_per_token"], df.iloc[0]["ref_tokens"]
    if pd.isna(nll) or pd.isna(tokens):  # a store written before the importer refused such rows
        return ReferenceNll(why="the score-reference run of this model recorded no NLL per token for this step")
    return ReferenceNll(float(nll), int(tokens), "score-reference run")


def render_reference_nll(ref: ReferenceNll | None) -> str:
    """The metric cell beside F1: the NLL per token, or "not recorded" with why on hover; nothing for
    the reference column itself."""
    if ref is None or (ref.nll_per_token is None and ref.why is None):
        return ""
    if ref.nll_per_token is None:
        return (f'<div class="lab-metric lab-ref-nll" data-metric="ref NLL/tok" title="{esc(ref.why)}">'
                f'<span>ref NLL/tok</span><b class="lab-muted">{NOT_RECORDED}</b></div>')
    title = f"the reference answer's {ref.tokens} tokens under this engine ({ref.source}); lower is likelier"
    return (f'<div class="lab-metric lab-ref-nll" data-metric="ref NLL/tok" title="{esc(title)}">'
            f'<span>ref NLL/tok</span><b>{fmt(ref.nll_per_token, 3)}</b></div>')
