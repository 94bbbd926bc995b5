"""A reference-likelihood run: every selected step's reference answer scored by one engine (teacher forcing).

No sampling, no generation: per step the engine's rendered prompt and the step's recorded reply
(`ref_raw`) go through `engine.score_reference` (lab.engines.reference_likelihood). The run is
checkpointed like a replay (lab.runs.checkpoint.RunCheckpoint, one row per finished step), resumes with
`resume`, and is written as `<name>.reference.json`:

    {"kind": "tb2lite-reference-likelihood", "format_version": 1, "engine_spec", "model_path",
     "lora_path", "model_short", "contract", "replay_sha256", "timestamp", "aggregate", "per_step",
     …ReferenceConfig.extra (e.g. a training run's `training` block)}

`aggregate`: steps scored, reference tokens, `ref_nll_per_token` (total NLL / total tokens) and
`mean_step_nll_per_token`. Each per-step row: task_id, step_idx, bucket, source_group, ref_tokens,
ref_logprob (sum), ref_logprob_mean, ref_nll_per_token, prompt_tokens, token_logprobs, tokens,
unit_logprobs (per located command unit: index, tokens, summed log-probability) and error.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab import __version__
from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.engines.reference_likelihood import ReferenceScore, unit_logprobs, unit_spans
from lab.errors import LabError
from lab.runs.checkpoint import RunCheckpoint
from lab.runs.claims import TakenFn
from lab.prompts.engine_prompt import render_for_engine
from lab.runs.pipeline import parse_reference
from lab.runs.replay import run_file_name, user_run_name, utc_timestamp

KIND = "tb2lite-reference-likelihood"
FORMAT_VERSION = 1
SUFFIX = ".reference"


@dataclass
class ReferenceConfig:
    """Options of one reference-likelihood run."""

    out_dir: Path
    run_name: str | None = None
    resume: bool = False
    replay_fingerprint: str = ""
    selection: dict | None = None
    eval_path: str = ""
    overwrite: bool = False  # as ReplayConfig: a run is never replaced unasked (lab.runs.claims)
    name_given: bool = False
    taken: TakenFn | None = None
    notify: Callable[[str], None] | None = None
    extra: dict = field(default_factory=dict)  # more top-level fields of the file (a training run's step …)


def is_reference_file(result: object) -> bool:
    """True for a reference-likelihood file (a dict whose `kind` says so)."""
    return isinstance(result, dict) and result.get("kind") == KIND


def score_step(engine: EngineBase, step: Step) -> dict:
    """One step's row: the reference scored on the engine's own rendered prompt, units located."""
    prompt = render_for_engine(engine, step)
    try:
        score = engine.score_reference(prompt.text, step.ref_raw)
    except LabError as exc:
        score = ReferenceScore([], error=str(exc))
    spans = unit_spans(step.ref_raw, list(parse_reference(step).command_units))
    score.units = unit_logprobs(spans, score.offsets, score.logprobs)
    return {"task_id": step.task_id, "step_idx": step.step_idx, "sample_idx": step.sample_idx,
            "bucket": step.bucket, "source_group": step.source_group, **score.to_row()}


def aggregate(rows: list[dict]) -> dict:
    """Steps scored, reference tokens, NLL per token over all tokens, and the mean of the steps' NLL per token."""
    scored = [r for r in rows if r.get("ref_tokens") and r.get("ref_logprob") is not None]
    tokens = sum(int(r["ref_tokens"]) for r in scored)
    nll = -sum(float(r["ref_logprob"]) for r in scored)
    return {
        "steps": len(rows),
        "steps_scored": len(scored),
        "steps_failed": len(rows) - len(scored),
        "ref_tokens": tokens,
        "ref_nll_per_token": round(nll / tokens, 6) if tokens else None,
        "mean_step_nll_per_token": round(sum(float(r["ref_nll_per_token"]) for r in scored) / len(scored), 6)
        if scored else None,
    }


def _header(engine: EngineBase, config: ReferenceConfig, steps: list[Step]) -> dict:
    return {"kind": KIND, "engine": engine.spec, "steps": len(steps), "replay_sha256": config.replay_fingerprint,
            "selection": config.selection or {}}


def score_reference_run(
    engine: EngineBase,
    steps: list[Step],
    config: ReferenceConfig,
    progress: Callable[[int, int], None] | None = None,
    stop: threading.Event | None = None,
) -> Path:
    """Score every step's reference on a loaded `engine`; return the finished file's path."""
    if not engine.scores_reference:
        raise LabError(f"{engine.spec}: a {engine.kind} engine cannot score the reference (it has no model); "
                       "use transformers:, vllm:, or openai: on a vLLM server")
    with RunCheckpoint.claim(config.out_dir, run_file_name(engine, config.run_name), suffix=SUFFIX,
                             resume=config.resume, overwrite=config.overwrite, explicit=config.name_given,
                             taken=config.taken, notify=config.notify) as run:
        return _score_claimed(engine, steps, config, run, progress, stop)


def _same_reference_run(path: Path, old: dict, new: dict) -> None:
    """Refuse to resume a checkpoint of another reference run (its engine, steps or replay differ)."""
    if {k: old.get(k) for k in new} != new:
        raise LabError(f"{path}: the checkpoint is of another run (engine, steps or replay differ); "
                       "remove it or drop --resume")


def _score_claimed(engine: EngineBase, steps: list[Step], config: ReferenceConfig, run: RunCheckpoint,
                   progress: Callable[[int, int], None] | None, stop: threading.Event | None) -> Path:
    """score_reference_run once its run name is held."""
    _, entries = run.begin(_header(engine, config, steps), _same_reference_run)
    done = {f"{e.row.get('task_id')}/{e.row.get('step_idx')}": e.row for e in entries}
    total = len(steps)
    if progress:
        progress(len(done), total)
    for step in steps:
        if step.key in done:
            continue
        if stop is not None and stop.is_set():
            raise LabError(f"stopped: {len(done)} of {total} steps scored are kept in {run.path}; "
                           "run again with --resume")
        row = score_step(engine, step)
        run.append(row)
        done[step.key] = row
        if progress:
            progress(len(done), total)
    run.sync()
    rows = [done[s.key] for s in steps]
    info = engine.describe()
    model_path = engine.model_id or info.model
    result = {
        "kind": KIND,
        "format_version": FORMAT_VERSION,
        "engine_spec": engine.spec,
        "model_path": model_path,
        "lora_path": info.lora,
        "model_short": (user_run_name(engine, config.run_name, config.name_given, run.name)
                        or model_path.rstrip("/").split("/")[-1] or engine.kind),
        "contract": engine.contract,
        "eval_path": config.eval_path,
        "replay_sha256": config.replay_fingerprint,
        "timestamp": utc_timestamp(),
        "lab_version": __version__,
        "aggregate": aggregate(rows),
        "per_step": rows,
        **config.extra,
    }
    return run.finish(json.loads(json.dumps(result)))
