"""Batch replay of TB2-lite steps on one engine, written as a result file in the published schema."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from lab import __version__
from lab.data.step import Step
from lab.engines.base import Engine, Sampling
from lab.errors import LabError
from lab.prompts.guard import check_context, context_stats
from lab.prompts.render import template_metadata
from lab.runs.checkpoint import Checkpoint
from lab.runs.pipeline import PROMPT_FREE_KINDS, StepResult, prompt_options_of, render_for_engine, run_steps
from lab.runs.resultfile import CORRECTED, LEGACY, write_result_file
from lab.runs.samples import base_seed, run_sampled_steps
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD, stability_aggregate

# progress(done, total, live_aggregate_or_None): the aggregate comes with some calls only
ProgressFn = Callable[[int, int, dict | None], None]


class RawFallbackError(LabError):
    """Some prompts fell back to the raw history text; the harness refuses to rank such runs."""


@dataclass
class ReplayConfig:
    """Options of one batch replay."""

    out_dir: Path
    eval_path: str = ""
    scorer: str = "corrected"
    resume: bool = False
    chunk_size: int = 16
    allow_raw_fallback: bool = False
    max_model_len: int | None = None
    sampling: Sampling | None = None
    run_name: str | None = None
    extra: dict = field(default_factory=dict)
    samples: int = 1  # answers per step (lab.runs.samples); 1 writes exactly today's files
    pass_threshold: float = DEFAULT_PASS_THRESHOLD


def run_file_name(engine: Engine, explicit: str | None = None) -> str:
    """File stem of a run: the explicit name, else the engine's short name, made path-safe."""
    name = explicit or getattr(engine, "name", None) or engine.kind
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or engine.kind


def utc_timestamp() -> str:
    """Naive UTC ISO timestamp without `Z` (SPEC §8)."""
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def replay(
    engine: Engine,
    steps: list[Step],
    config: ReplayConfig,
    progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
) -> Path:
    """Replay `steps` on a loaded `engine`; return the path of the finished result file.

    Finished steps are appended to `<name>.partial.jsonl` as they complete. With `resume`,
    steps already in that checkpoint are kept and only the rest are generated. `stop` lets a
    caller interrupt between chunks (the checkpoint then holds everything done so far).
    """
    out_dir = Path(config.out_dir)
    stem = run_file_name(engine, config.run_name)
    final_path = out_dir / f"{stem}.json"
    checkpoint = Checkpoint(out_dir / f"{stem}.partial.jsonl")
    sampling = config.sampling or getattr(engine, "default_sampling", None) or Sampling()
    if config.samples > 1:  # sample k uses seed S + k; the file records S
        sampling = replace(sampling, seed=base_seed(sampling))

    prompts = [render_for_engine(engine, s) for s in steps]
    generates = engine.kind not in PROMPT_FREE_KINDS
    meta = template_metadata(prompts, prompt_options_of(engine))
    if generates and not config.allow_raw_fallback and not meta.get("rank_eligible", True):
        raise RawFallbackError(
            f"{engine.spec}: {meta['template_status_counts'].get('raw_fallback', 0)} prompts fell back to raw text "
            f"({'; '.join(meta.get('raw_fallback_errors', []))}). Fix the chat template or pass --allow-raw-fallback."
        )
    lengths = [p.n_tokens for p in prompts if p.n_tokens is not None]
    ctx = None
    if generates and lengths and len(lengths) == len(prompts):
        max_len = config.max_model_len or getattr(engine, "max_model_len", None)
        messages_rows = sum(1 for s in steps if s.messages)
        if max_len:
            check_context([s.key for s in steps], lengths, max_len, sampling.max_tokens)
            ctx = context_stats(lengths, max_len, sampling.max_tokens, messages_rows)

    done: dict[str, dict] = {}
    header = _header(engine, config, sampling, len(steps))
    if config.resume and checkpoint.exists():
        old_header, rows = checkpoint.read()
        _check_same_run(checkpoint.path, old_header, header)
        done = {f"{r['task_id']}/{r['step_idx']}": r for r in rows}
        header["timings"] = (old_header or {}).get("timings", {"gen_time_sec": 0.0})
    else:
        checkpoint.start(header)
    timings = header.setdefault("timings", {"gen_time_sec": 0.0})

    todo = [i for i, s in enumerate(steps) if s.key not in done]
    absent: set[str] = set()
    last_live = [0.0]
    total = len(steps)
    if progress:
        progress(len(steps) - len(todo), total, _live_aggregate(done, config.scorer))
    for start in range(0, len(todo), max(config.chunk_size, 1)):
        if stop is not None and stop.is_set():
            checkpoint.close()
            raise InterruptedError(f"replay of {engine.spec} stopped; resume with --resume")
        chunk = todo[start : start + config.chunk_size]

        overhead = 0.0

        def on_result(j: int, result: StepResult) -> None:
            nonlocal overhead
            if result.completion.absent:  # a stored run lacking this step: it covers only what it answered
                absent.add(result.step.key)
                if progress:
                    last = len(done) + len(absent) == total
                    progress(len(done) + len(absent), total, _live_aggregate(done, config.scorer) if last else None)
                return
            t = time.perf_counter()
            done[result.step.key] = result.per_step
            checkpoint.append(result.per_step)
            if progress:
                # the live aggregate is recomputed at most 4 times a second (and at the end)
                live = None
                if t - last_live[0] >= 0.25 or len(done) + len(absent) == total:
                    live, last_live[0] = _live_aggregate(done, config.scorer), t
                progress(len(done) + len(absent), total, live)
            overhead += time.perf_counter() - t

        t0 = time.perf_counter()
        try:
            chunk_steps, chunk_prompts = [steps[i] for i in chunk], [prompts[i] for i in chunk]
            if config.samples > 1:
                run_sampled_steps(engine, chunk_steps, sampling, on_result, config.scorer, chunk_prompts,
                                  n=config.samples)
            else:
                run_steps(engine, chunk_steps, sampling, on_result, config.scorer, chunk_prompts)
        finally:
            # generation time only: the lab's own bookkeeping in the callback is not the engine's
            timings["gen_time_sec"] = timings.get("gen_time_sec", 0.0) + (time.perf_counter() - t0 - overhead)
            checkpoint.append_timings(timings)
            checkpoint.sync()

    per_step = [done[s.key] for s in steps if s.key in done]
    result = _result(engine, config, sampling, header, per_step, meta, ctx)
    write_result_file(final_path, result)
    checkpoint.remove()
    return final_path


# What must match for a checkpoint to be resumed: mixing answers of another engine or other
# sampling settings into one result file would make its numbers meaningless.
RESUME_KEYS = ("engine", "sampling", "scorer", "samples")


def _check_same_run(path: Path, old: dict | None, new: dict) -> None:
    """Refuse to resume a checkpoint written by a different engine, sampling or scorer."""
    if old is None:
        return
    changed = [k for k in RESUME_KEYS if k in old and old.get(k) != new.get(k)]
    if changed:
        raise LabError(
            f"{path}: this checkpoint was written with a different {', '.join(changed)} "
            f"({'; '.join(f'{k}: {old.get(k)!r} then, {new.get(k)!r} now' for k in changed)}); "
            "resume with the same settings, pick another run name, or delete the checkpoint to start over"
        )


def _live_aggregate(done: dict[str, dict], scorer: str) -> dict | None:
    if not done:
        return None
    return aggregate_scores(list(done.values()), scorer)


def _header(engine: Engine, config: ReplayConfig, sampling: Sampling, n_steps: int) -> dict:
    header = {
        "engine": engine.spec,
        "eval_path": config.eval_path,
        "scorer": config.scorer,
        "steps": n_steps,
        "sampling": sampling.to_dict(),
        "started": utc_timestamp(),
        "load_time_sec": getattr(engine, "load_time_sec", None),
    }
    if config.samples > 1:
        header["samples"] = config.samples
    return header


def _result(
    engine: Engine,
    config: ReplayConfig,
    sampling: Sampling,
    header: dict,
    per_step: list[dict],
    meta: dict,
    ctx: dict | None,
) -> dict:
    info = engine.describe()
    gen_time = round(header["timings"]["gen_time_sec"], 1)
    load_time = header.get("load_time_sec")
    model_id = getattr(engine, "model_id", "") or info.model
    model_short = (config.run_name or model_id.rstrip("/").split("/")[-1] or engine.kind).replace(" ", "-")
    prompt_template = dict(meta)
    if ctx is not None:
        prompt_template["context_stats"] = ctx
    return {
        "model": model_short,
        "model_path": model_id,
        "lora_path": info.lora,
        "lora_name": info.lora.rstrip("/").split("/")[-1] if info.lora else None,
        "model_short": model_short,
        "gpu": info.device,
        "eval_path": config.eval_path,
        "timestamp": utc_timestamp(),
        "load_time_sec": round(load_time, 1) if isinstance(load_time, (int, float)) else None,
        "gen_time_sec": gen_time,
        "avg_sec_per_step": round(gen_time / max(len(per_step), 1), 3),
        "sampling": {
            **sampling.to_dict(),
            **prompt_options_of(engine).to_dict(),
            "backend": engine.kind,
            **getattr(engine, "engine_settings", lambda: {})(),
        },
        "prompt_template": prompt_template,
        "aggregate": {**aggregate_scores(per_step, config.scorer),
                      **(stability_aggregate(per_step, config.pass_threshold) if config.samples > 1 else {})},
        "per_step": per_step,
        "scoring_version": LEGACY if config.scorer == "legacy" else CORRECTED,
        "engine_spec": engine.spec,
        "contract": getattr(engine, "contract", "tb2lite-json"),
        "lab_version": __version__,
        **config.extra,
    }
