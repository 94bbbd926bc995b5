"""Batch replay of TB2-lite steps on one engine, written as a result file in the published schema."""
from __future__ import annotations

import hashlib
import re
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from lab import __version__
from lab.data.step import Step
from lab.engines.base import Sampling
from lab.engines.common import EngineBase
from lab.engines.context import context_length
from lab.errors import LabError
from lab.prompts.guard import check_context, context_stats
from lab.prompts.render import RenderedPrompt, template_metadata
from lab.runs.checkpoint import RunCheckpoint
from lab.runs.claims import TakenFn
from lab.runs.meter import ReplayMeter, step_tokens
from lab.prompts.engine_prompt import prompt_options_of, render_for_engine
from lab.runs.pipeline import StepResult, run_steps
from lab.resultfiles.files import CORRECTED as CORRECTED_VERSION, LEGACY as LEGACY_VERSION
from lab.resultfiles.schema import validate_result, validate_rows
from lab.runs.samples import base_seed, run_sampled_steps
from lab.runs.template_hash import template_sha256
from lab.scoring.aggregate import aggregate_scores
from lab.scoring.stability import DEFAULT_PASS_THRESHOLD, stability_aggregate
from lab.tb2lite import CORRECTED

# progress(done, total, live_aggregate_or_None): the aggregate comes with some calls only
ProgressFn = Callable[[int, int, dict | None], None]


class RawFallbackError(LabError):
    """Some prompts fell back to the raw history text; the harness refuses to rank such runs."""


@dataclass
class ReplayConfig:
    """Options of one batch replay."""

    out_dir: Path
    eval_path: str = ""
    scorer: str = CORRECTED
    resume: bool = False
    chunk_size: int = 16
    allow_raw_fallback: bool = False
    max_model_len: int | None = None
    sampling: Sampling | None = None
    run_name: str | None = None
    extra: dict = field(default_factory=dict)
    replay_fingerprint: str = ""  # ReplaySet.fingerprint: sha256 of the replay source
    selection: dict = field(default_factory=dict)  # how the steps were chosen: mode, tasks, limit
    samples: int = 1  # answers per step (lab.runs.samples); 1 writes exactly today's files
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    overwrite: bool = False  # replace a run of the same name (never done unasked: lab.runs.claims)
    name_given: bool = False  # run_name is the user's own: taken means a refusal, not `NAME-2`
    taken: TakenFn | None = None  # more places a name can be taken (a run in the store)
    notify: Callable[[str], None] | None = None  # told when the run gets another name than asked
    replay_steps: int | None = None  # scored steps of the replay the run is made on (before --tasks/--limit)
    # answer only these steps now (a race's round: lab.sweep.race); the rest wait in the checkpoint, which
    # replay() then returns instead of a result file, for a later call or `replay --resume`
    only: frozenset[str] | None = None


def run_name_max() -> int:
    """The longest run name (lab/runs/limits.yaml)."""
    import yaml

    return int(yaml.safe_load(Path(__file__).with_name("limits.yaml").read_text(encoding="utf-8"))["run_name_max"])


def default_run_name(engine: EngineBase) -> str:
    """A run's name when none is given: the engine's name, and for a model engine whose name the user did not
    choose (`name=`) its kind and the preset it runs with, so one checkpoint replayed on two engines, or with and
    without a preset, gets two names (`checkpoint-3-vllm`, `checkpoint-3-transformers-gemma4-e4b-sft`)."""
    name = engine.name or engine.kind
    if engine.name_given or engine.answers_from_data:
        return name
    preset = engine.preset_key if engine.preset_on_target else None
    tag = "-".join(t for t in (engine.kind, preset) if t)
    return name if name.endswith(tag) else f"{name}-{tag}"


def _stem(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def check_run_name_length(explicit: str | None) -> None:
    """LabError when a run name the user gives is longer than `run_name_max` (checked before any engine
    loads, so `--name` is an input error like any other: exit 2)."""
    limit = run_name_max()
    if explicit and len(_stem(explicit)) > limit:
        raise LabError(f"run name '{explicit[:40]}…' has {len(explicit)} characters; give at most {limit} "
                       "(it becomes the result file's name)")


def run_stem(name: str, fallback: str) -> str:
    """`name` made a path-safe file stem (`fallback` when nothing of it is left), cut to `run_name_max`."""
    stem = _stem(name) or fallback
    return stem[:run_name_max()].rstrip("-")


def run_file_name(engine: EngineBase, explicit: str | None = None) -> str:
    """File stem of a run: the explicit name, else default_run_name, made path-safe.
    An explicit name longer than `run_name_max` is a LabError (an engine's own name is cut)."""
    check_run_name_length(explicit)
    return run_stem(explicit or default_run_name(engine), engine.kind)


def user_run_name(engine: EngineBase, config_run_name: str | None, name_given: bool, claimed: str) -> str | None:
    """The run's name when the user chose it (`--name`, `name=` in the SPEC, a training run's name): the name its
    file got (`claimed`), which the store shows; None when the lab made the name up."""
    return claimed if name_given or engine.name_given or config_run_name else None


def utc_timestamp() -> str:
    """Naive UTC ISO timestamp without `Z` (SPEC §8)."""
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def replay(
    engine: EngineBase,
    steps: list[Step],
    config: ReplayConfig,
    progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    meter: ReplayMeter | None = None,
) -> Path:
    """Replay `steps` on a loaded `engine`; return the path of the finished result file.

    Finished steps are appended to the run's checkpoint as they complete (lab.runs.checkpoint.RunCheckpoint).
    With `resume`, steps already in that checkpoint are kept and only the rest are generated. `stop` lets a
    caller interrupt between chunks (the checkpoint then holds everything done so far). With
    `config.only`, only those steps are generated now; while others are left, the run stays a checkpoint
    (its path is returned; every step's key and the run's header are those of all `steps`).
    `meter`, read by the caller from another thread, follows the tokens generated between finished steps.
    """
    if config.chunk_size < 1:
        raise LabError(f"chunk size must be at least 1, got {config.chunk_size}")
    with RunCheckpoint.claim(config.out_dir, run_file_name(engine, config.run_name), resume=config.resume,
                             overwrite=config.overwrite, explicit=config.name_given, taken=config.taken,
                             notify=config.notify) as run:
        named = user_run_name(engine, config.run_name, config.name_given, run.name)
        if named != config.run_name:
            config = replace(config, run_name=named)
        return _replay_claimed(engine, steps, config, run, progress, stop, meter)


def _replay_claimed(engine: EngineBase, steps: list[Step], config: ReplayConfig, run: RunCheckpoint,
                    progress: ProgressFn | None, stop: threading.Event | None,
                    meter: ReplayMeter | None = None) -> Path:
    """replay() once its run name is held: the prompts, the checkpoint begun or resumed, the steps left
    generated, and the result file written in the checkpoint's place."""
    sampling = config.sampling or engine.default_sampling
    if config.samples > 1:  # sample k uses seed S + k; the file records S
        sampling = replace(sampling, seed=base_seed(sampling))
    prompts, meta, ctx = _prompts(engine, steps, config, sampling)
    header = _header(engine, config, sampling, steps)
    tally = _Tally.begin(run, header)
    todo = [i for i, s in enumerate(steps) if s.key not in tally.done and (config.only is None or s.key in config.only)]
    _Chunks(engine, steps, prompts, config, sampling, run, tally).generate(todo, progress, stop, meter)
    if tally.count < len(steps) and config.only is not None:  # steps left for a later call
        run.close()
        return run.path
    header["timings"] = {"gen_time_sec": _gen_time(steps, tally.gen_secs, header.get("timings"))}
    result = _result(engine, config, sampling, header, [tally.done[s.key] for s in steps if s.key in tally.done],
                     meta, ctx)
    validate_result(result, str(run.final))  # never write what the store or rescore would refuse
    return run.finish(result)


def _prompts(engine: EngineBase, steps: list[Step], config: ReplayConfig,
             sampling: Sampling) -> tuple[list[RenderedPrompt], dict, dict | None]:
    """(every step's prompt as the engine receives it, the template's metadata, the context stats or None); a
    RawFallbackError for prompts that fell back to raw text and a ContextLengthError for prompts past the
    context, unless the engine answers from data (its prompts are rendered for display only)."""
    prompts = [render_for_engine(engine, s) for s in steps]
    generates = not engine.answers_from_data
    meta = template_metadata(prompts, prompt_options_of(engine))
    meta["template_sha256"] = template_sha256(engine)  # the template as one hash: comparisons check it
    if generates and not config.allow_raw_fallback and not meta.get("rank_eligible", True):
        raise RawFallbackError(
            f"{engine.spec}: {meta['template_status_counts'].get('raw_fallback', 0)} prompts fell back to raw text "
            f"({'; '.join(meta.get('raw_fallback_errors', []))}). Fix the chat template or pass --allow-raw-fallback."
        )
    lengths = [p.n_tokens for p in prompts if p.n_tokens is not None]
    counted = generates and lengths and len(lengths) == len(prompts)  # every prompt's length known
    max_len = context_length(engine, config.max_model_len) if counted else None
    if not max_len:
        return prompts, meta, None
    check_context([s.key for s in steps], lengths, max_len, sampling.max_tokens)
    return prompts, meta, context_stats(lengths, max_len, sampling.max_tokens, sum(1 for s in steps if s.messages))


@dataclass
class _Tally:
    """The run's finished steps: their rows and generation seconds (a resumed run's read back from its
    checkpoint), and the steps a stored run lacks (it covers only what it answered)."""

    done: dict[str, dict] = field(default_factory=dict)
    gen_secs: dict[str, float | None] = field(default_factory=dict)
    absent: set[str] = field(default_factory=set)

    @classmethod
    def begin(cls, run: RunCheckpoint, header: dict) -> "_Tally":
        """Begin `run`'s checkpoint with `header`: the steps of a resumed one (checked to be this run's, its
        generation time carried in `header`), or none for a new run."""
        tally = cls()
        old_header, entries = run.begin(header, _check_same_run)
        if old_header is None:
            return tally
        for entry in entries:
            key = f"{entry.row.get('task_id')}/{entry.row.get('step_idx')}"
            tally.done[key], tally.gen_secs[key] = entry.row, entry.gen_sec
        validate_rows(list(tally.done.values()), str(run.path))
        timings = old_header.get("timings")
        header["timings"] = timings if isinstance(timings, dict) else {"gen_time_sec": 0.0}
        return tally

    @property
    def count(self) -> int:
        """Steps finished or absent."""
        return len(self.done) + len(self.absent)


class _Chunks:
    """The steps left, generated chunk by chunk: each finished step into the checkpoint, the tally, the meter and
    the progress; Stop ends it between chunks and cuts the requests in flight."""

    def __init__(self, engine: EngineBase, steps: list[Step], prompts: list[RenderedPrompt], config: ReplayConfig,
                 sampling: Sampling, run: RunCheckpoint, tally: _Tally) -> None:
        self.engine, self.steps, self.prompts, self.config, self.sampling = engine, steps, prompts, config, sampling
        self.run, self.tally = run, tally
        self.progress: ProgressFn | None = None
        self.meter: ReplayMeter | None = None
        self.last_live = 0.0
        self.mark = 0.0

    def generate(self, todo: list[int], progress: ProgressFn | None, stop: threading.Event | None,
                 meter: ReplayMeter | None) -> None:
        """Generate the steps `todo` (InterruptedError when `stop` ends the run before every step is done)."""
        self.progress, self.meter = progress, meter
        total = len(self.steps)
        if meter is not None and not self.engine.answers_from_data:
            meter.begin(self.engine.live_progress(), len(todo), self.sampling.max_tokens * max(self.config.samples, 1))
        if progress:
            progress(total - len(todo), total, _live_aggregate(self.tally.done, self.config.scorer))
        # a chunk keeps a concurrent engine (a server) busy: at least twice its requests in flight
        chunk_size = max(self.config.chunk_size, 2 * (self.engine.concurrency or 0), 1)
        watching = _cancel_on_stop(self.engine, stop)  # Stop also cuts the requests in flight, not only between chunks
        try:
            for start in range(0, len(todo), chunk_size):
                if stop is not None and stop.is_set():
                    break
                self._chunk(todo[start: start + chunk_size])
        finally:
            watching.set()
        if stop is not None and stop.is_set() and self.tally.count < total:
            self.run.close()
            raise InterruptedError(f"replay of {self.engine.spec} stopped; resume with --resume")

    def _chunk(self, chunk: list[int]) -> None:
        steps, prompts = [self.steps[i] for i in chunk], [self.prompts[i] for i in chunk]
        self.mark = time.perf_counter()
        try:
            if self.config.samples > 1:
                run_sampled_steps(self.engine, steps, self.sampling, self._finished, self.config.scorer, prompts,
                                  n=self.config.samples)
            else:
                run_steps(self.engine, steps, self.sampling, self._finished, self.config.scorer, prompts)
        finally:
            self.run.sync()

    def _finished(self, j: int, result: StepResult) -> None:
        tally, total = self.tally, len(self.steps)
        if result.completion.absent:  # a stored run lacking this step: it covers only what it answered
            tally.absent.add(result.step.key)
            if self.progress:
                live = _live_aggregate(tally.done, self.config.scorer) if tally.count == total else None
                self.progress(tally.count, total, live)
            self.mark = time.perf_counter()
            return
        # generation time of this step: since the previous step finished, not counting the lab's own
        # bookkeeping below (checkpoint, live aggregate, progress)
        gen = time.perf_counter() - self.mark
        tally.done[result.step.key], tally.gen_secs[result.step.key] = result.per_step, gen
        self.run.append(result.per_step, gen)
        if self.meter is not None:
            self.meter.step_done(step_tokens(result.per_step))
        if self.progress:
            # the live aggregate is recomputed at most 4 times a second (and at the end)
            t, live = time.perf_counter(), None
            if t - self.last_live >= 0.25 or tally.count == total:
                live, self.last_live = _live_aggregate(tally.done, self.config.scorer), t
            self.progress(tally.count, total, live)
        self.mark = time.perf_counter()


# What must match for a checkpoint to be resumed: mixing answers of another engine, other sampling
# settings, another replay file or another selection of steps into one result file would make its
# numbers meaningless (and label rows scored against one replay with another's name).
RESUME_KEYS = ("engine", "sampling", "scorer", "samples", "replay_sha256", "selection", "step_keys")
RESUME_LABELS = {"replay_sha256": "replay source", "selection": "step selection", "step_keys": "selected steps"}


def _describe_change(key: str, old: object, new: object) -> str:
    if key == "replay_sha256":
        return f"replay source content: sha256 {str(old)[:12]}… then, {str(new)[:12]}… now"
    if isinstance(old, dict) and isinstance(new, dict):
        diffs = [f"{k} {old.get(k)!r} then, {new.get(k)!r} now" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        return f"{RESUME_LABELS.get(key, key)}: {', '.join(diffs)}"
    return f"{RESUME_LABELS.get(key, key)}: {old!r} then, {new!r} now"


def _check_same_run(path: Path, old: dict, new: dict) -> None:
    """Refuse to resume a checkpoint written by another engine, sampling, scorer, replay source or
    step selection; the message says what differs. (Keys a checkpoint lacks are not compared.)"""
    changed = [k for k in RESUME_KEYS if k in old and old.get(k) != new.get(k)]
    if changed:
        raise LabError(
            f"{path}: this checkpoint was written with a different {', '.join(RESUME_LABELS.get(k, k) for k in changed)} "
            f"({'; '.join(_describe_change(k, old.get(k), new.get(k)) for k in changed)}); "
            "resume with the same settings, pick another run name, or delete the checkpoint to start over"
        )


def _cancel_on_stop(engine: EngineBase, stop: threading.Event | None) -> threading.Event:
    """Watch `stop` while a replay runs: once set, the engine's cancel() drops the requests in flight.
    Returns the event that ends the watch."""
    over = threading.Event()
    cancel = engine.cancel
    if stop is None:
        return over

    def watch() -> None:
        while not over.is_set():
            if stop.wait(0.05):
                cancel()  # again every 0.2 s: a chunk that began just as Stop came is cut too
                over.wait(0.2)

    threading.Thread(target=watch, name="lab-replay-stop", daemon=True).start()
    return over


def _steps_digest(steps: list[Step]) -> dict:
    """The selected steps, pinned: how many, and a hash of their keys in order."""
    keys = "\n".join(s.key for s in steps).encode("utf-8")
    return {"count": len(steps), "keys_sha256": hashlib.sha256(keys).hexdigest()}


def _gen_time(steps: list[Step], gen_secs: dict[str, float | None], old_timings: dict | None) -> float:
    """Generation seconds of the run: the sum over its finished steps. A checkpoint from before
    per-step timing keeps its chunk-level total for the steps it holds."""
    known = [gen_secs[s.key] for s in steps if s.key in gen_secs]
    if all(g is not None for g in known):
        return float(sum(known))  # type: ignore[arg-type]
    legacy = float((old_timings or {}).get("gen_time_sec") or 0.0)
    return legacy + sum(g for g in known if g is not None)


def _live_aggregate(done: dict[str, dict], scorer: str) -> dict | None:
    if not done:
        return None
    return aggregate_scores(list(done.values()), scorer)


def _header(engine: EngineBase, config: ReplayConfig, sampling: Sampling, steps: list[Step]) -> dict:
    header = {
        "engine": engine.spec,
        "eval_path": config.eval_path,
        "scorer": config.scorer,
        "steps": len(steps),
        "step_keys": _steps_digest(steps),
        "sampling": sampling.to_dict(),
        "started": utc_timestamp(),
        "load_time_sec": engine.load_time_sec,
    }
    if config.replay_fingerprint:
        header["replay_sha256"] = config.replay_fingerprint
    if config.selection:
        header["selection"] = config.selection
    if config.samples > 1:
        header["samples"] = config.samples
    return header


def _result(
    engine: EngineBase,
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
    model_id = engine.model_id or info.model
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
            "preset": engine.preset_key,
            "logprobs_top_k": engine.logprobs_k,
            **engine.engine_settings(),
        },
        "prompt_template": prompt_template,
        "aggregate": {**aggregate_scores(per_step, config.scorer),
                      **(stability_aggregate(per_step, config.pass_threshold) if config.samples > 1 else {})},
        "per_step": per_step,
        "scoring_version": LEGACY_VERSION if config.scorer == "legacy" else CORRECTED_VERSION,
        "engine_spec": engine.spec,
        "contract": engine.contract,
        "lab_version": __version__,
        # what a comparison checks before it calls two runs comparable (lab.resultfiles.run_settings)
        **({"replay_sha256": config.replay_fingerprint} if config.replay_fingerprint else {}),
        # the run's coverage is counted against the replay it was made on, not the 303 published steps
        **({"replay_steps": config.replay_steps} if config.replay_steps else {}),
        # and a selection limited on purpose (--limit, --tasks) against the steps it chose: complete, not partial
        # (the selection, with the steps it chose, is also a setting a comparison checks)
        **({"selection": {**config.selection, "steps": header["steps"]}} if config.selection else {}),
        # the name the user gave the run: the name the store shows (lab.store.names.display_name)
        **({"run_name": config.run_name} if config.name_given or engine.name_given else {}),
        **config.extra,
    }
