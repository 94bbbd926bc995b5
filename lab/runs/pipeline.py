"""One straight path per step: render the prompt, generate, parse, score, shape the per-step row."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from lab.data.step import Step
from lab.engines.base import Completion, Request, Sampling
from lab.engines.common import EngineBase
from lab.prompts.contracts import get_contract
from lab.prompts.engine_prompt import render_for_engine
from lab.prompts.render import RenderedPrompt
from lab.scoring.action import ParsedAction
from lab.scoring.aggregate import task_complete_fields
from lab.scoring.metrics import StepMetrics, score_batch
from lab.scoring.parse import parse_action
from lab.tb2lite import CORRECTED

PREVIEW_CHARS = 1200
TOKEN_IDS_PREVIEW = 64


@dataclass
class StepResult:
    """Everything the lab knows about one engine's answer to one step."""

    step: Step
    prompt: RenderedPrompt
    completion: Completion
    parsed: ParsedAction
    ref_parsed: ParsedAction
    metrics: StepMetrics
    per_step: dict = field(default_factory=dict)

    @property
    def engine_error(self) -> str | None:
        return self.completion.error


_REF_CACHE: dict[str, ParsedAction] = {}


def parse_reference(step: Step) -> ParsedAction:
    """The evaluator re-parses `ref_raw` with the same parser (SPEC §4), not the dataset's units."""
    cached = _REF_CACHE.get(step.ref_raw)
    if cached is None:
        cached = _REF_CACHE[step.ref_raw] = parse_action(step.ref_raw)
    return cached


def score_completion(
    engine: EngineBase, step: Step, prompt: RenderedPrompt, completion: Completion, scorer: str = CORRECTED
) -> StepResult:
    """Parse and score one completion against the step's reference."""
    contract = get_contract(engine.contract)
    parsed = contract.parse(completion.text or "")
    if completion.command_units is not None:
        # Stored answers: previews are cut at 1,200 characters, so the stored units are the truth.
        parsed.command_units = list(completion.command_units)
    ref = parse_reference(step)
    # the batch scorer (numpy F1 matrix) gives bit-identical numbers, 5-10x faster on heredoc steps
    metrics = score_batch([(parsed.command_units, ref.command_units)], scorer)[0]
    per_step = per_step_row(step, prompt, completion, parsed, ref, metrics, scorer)
    return StepResult(step, prompt, completion, parsed, ref, metrics, per_step)


def per_step_row(
    step: Step,
    prompt: RenderedPrompt,
    completion: Completion,
    parsed: ParsedAction,
    ref: ParsedAction,
    metrics: StepMetrics,
    scorer: str = CORRECTED,
) -> dict:
    """The per_step entry in the published schema (SPEC §8), plus the lab's extras after it."""
    ref_tc = bool(ref.task_complete)
    row = {
        "task_id": step.task_id,
        "sample_idx": step.sample_idx,
        "step_idx": step.step_idx,
        "source_group": step.source_group,
        "bucket": step.bucket,
        "valid_json": parsed.valid_json,
        "has_analysis": parsed.has_analysis,
        "has_plan": parsed.has_plan,
        "ref_task_complete": ref_tc,
        **task_complete_fields(parsed.task_complete, ref_tc, scorer),
        "ref_command_units": list(ref.command_units),
        "pred_command_units": list(parsed.command_units),
        **metrics.to_dict(),
        "pred_preview": (completion.text or "")[:PREVIEW_CHARS],
        "finish_reason": completion.finish_reason,
        "stop_reason": completion.stop_reason,
        "token_ids_preview": list(completion.token_ids[:TOKEN_IDS_PREVIEW]),
        # lab extras (ignored by the published tools)
        "raw_output": completion.text or "",
        "template_status": prompt.status,
        "prompt_tokens": completion.prompt_tokens if completion.prompt_tokens is not None else prompt.n_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "ttft_s": completion.ttft_s,
        "parse_failure": parsed.failure,
        "units_from_fallback": parsed.units_from_fallback,
        "error": completion.error,
        # per generated token: log-probability and top alternatives (lab.engines.logprobs); None: not recorded
        "logprobs": completion.logprobs.to_record() if completion.logprobs is not None else None,
    }
    if completion.logprobs_error:  # asked for, but the engine's were malformed
        row["logprobs_error"] = completion.logprobs_error
    return row


def run_steps(
    engine: EngineBase,
    steps: list[Step],
    sampling: Sampling | None = None,
    on_result: Callable[[int, StepResult], None] | None = None,
    scorer: str = CORRECTED,
    prompts: list[RenderedPrompt] | None = None,
) -> list[StepResult]:
    """Render, generate, parse and score `steps` on one engine; `on_result` fires per finished step."""
    sampling = sampling or engine.default_sampling
    prompts = prompts if prompts is not None else [render_for_engine(engine, s) for s in steps]
    requests = [Request(step=s, prompt=p.text, prompt_ids=p.token_ids) for s, p in zip(steps, prompts)]
    results: list[StepResult | None] = [None] * len(steps)

    def done(i: int, completion: Completion) -> None:
        results[i] = score_completion(engine, steps[i], prompts[i], completion, scorer)
        if on_result is not None:
            on_result(i, results[i])

    t0 = time.perf_counter()
    completions = engine.generate(requests, sampling, on_done=done)
    elapsed = time.perf_counter() - t0
    for i, completion in enumerate(completions):
        if completion is None:  # dropped by the engine's cancel() (Stop): not an answer
            continue
        if results[i] is None:  # engines that do not call on_done
            if completion.latency_s is None:
                completion.latency_s = elapsed / max(len(steps), 1)
            done(i, completion)
    return [r for r in results if r is not None]
