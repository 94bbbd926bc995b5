"""What a run is asked to do, as one type (`RunOptions`): the replay source and how its steps are chosen, the
scorer, the sampling asked for, the samples per step, the run's name, resume or overwrite. Every front door
builds it: `python -m lab replay`, `score-reference` and `sweep` from their arguments (lab.runs.replay_cli), the
Batch tab from its choices, the training callback from its options; `replay_config` makes the replay's own
ReplayConfig from it. Also here: the lab's settings for a run's replay, the steps it selects, and the selection
as its files record it."""
from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from lab.engines.base import Sampling
from lab.engines.common import EngineBase
from lab.errors import LabError
from lab.runs.claims import TakenFn
from lab.runs.replay import ReplayConfig
from lab.settings import Settings
from lab.tb2lite import CORRECTED


@dataclass(frozen=True)
class SamplingAsked:
    """Sampling values a run asks for; None keeps the engine's own (its preset's or SPEC's)."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None

    def over(self, base: Sampling) -> Sampling:
        """`base` (an engine's default sampling) with the values asked for."""
        return Sampling(**{**base.to_dict(), **{k: v for k, v in asdict(self).items() if v is not None}})


@dataclass(frozen=True)
class RunOptions:
    """What a run is asked to do (the defaults are `python -m lab replay`'s; tests/runs/test_run_options.py
    holds them to its parser's)."""

    replay: str | None = None  # a replay .jsonl, a datasets source or a URL; None: LAB_REPLAY, else the download
    mode: str = CORRECTED  # lab.tb2lite.REPLAY_MODES
    tasks: tuple[str, ...] | None = None  # only these task ids
    limit: int | None = None  # only the first N steps
    lenient: bool = False  # skip malformed replay lines instead of stopping
    scorer: str = CORRECTED  # lab.tb2lite.SCORER_NAMES
    sampling: SamplingAsked = field(default_factory=SamplingAsked)
    samples: int = 1  # answers per step (lab.runs.samples)
    pass_threshold: float | None = None  # a sample passes at this F1 (None: lab.scoring.stability's default)
    name: str | None = None  # the run's name as the user gave it (None: the engine's)
    out: str | None = None  # the output folder (None: the lab's runs folder)
    resume: bool = False  # continue an interrupted run of that name from its checkpoint
    overwrite: bool = False  # replace a run of that name (never done otherwise)
    chunk_size: int = 16  # steps per generate call (the checkpoint's granularity)
    max_model_len: int | None = None  # the context guard's limit (None: the engine's)
    allow_raw_fallback: bool = False  # run even when some prompts fall back to raw text

    @property
    def selection(self) -> dict:
        """How the run's steps are chosen, as its files record it (`step_selection`)."""
        return step_selection(self.mode, list(self.tasks) if self.tasks else None, self.limit)

    def sampling_for(self, engine: EngineBase) -> Sampling:
        """The engine's default sampling with the values this run asks for."""
        return self.sampling.over(engine.default_sampling)


@dataclass(frozen=True)
class ReplaySource:
    """The replay a run is made on, as its files record it: its path, its content's hash, and how many scored
    steps it holds before the run's selection (the run's coverage is counted against them)."""

    path: str
    fingerprint: str = ""
    steps: int | None = None

    @classmethod
    def of(cls, replay_set) -> "ReplaySource":
        """The source of a loaded lab.data.ReplaySet."""
        return cls(str(replay_set.path), replay_set.fingerprint, len(replay_set.steps))


def replay_config(options: RunOptions, engine: EngineBase, source: ReplaySource, out_dir: Path, *,
                  run_name: str | None = None, name_given: bool = False, selection: dict | None = None,
                  extra: dict | None = None, taken: TakenFn | None = None,
                  notify: Callable[[str], None] | None = None) -> ReplayConfig:
    """The ReplayConfig of `options` on a loaded `engine`, the one way every front door makes it. The run's name
    is the caller's to decide (`run_name`, and `name_given` when it is the user's own: a taken one is refused,
    never moved to NAME-2); `selection` is the one its files record (None: the options'; a Batch filter that no
    selection can state passes {}); `extra`: more top-level fields of the file (a shard's, a training run's)."""
    return ReplayConfig(
        out_dir=Path(out_dir), eval_path=source.path, scorer=options.scorer, resume=options.resume,
        chunk_size=options.chunk_size, allow_raw_fallback=options.allow_raw_fallback,
        max_model_len=options.max_model_len, sampling=options.sampling_for(engine), run_name=run_name,
        extra=dict(extra or {}), replay_fingerprint=source.fingerprint,
        selection=options.selection if selection is None else selection, samples=options.samples,
        **({"pass_threshold": options.pass_threshold} if options.pass_threshold is not None else {}),
        overwrite=options.overwrite, name_given=name_given, taken=taken, notify=notify, replay_steps=source.steps)


def step_selection(mode: str, tasks: list[str] | None, limit: int | None) -> dict:
    """How the steps of a run were chosen, as its checkpoint records it (resume must match)."""
    return {"mode": mode, "tasks": sorted(set(tasks)) if tasks else None, "limit": limit}


def replay_settings(replay: str | None) -> Settings:
    """The lab's settings for a run given a replay source (`--replay PATH`): that replay is the one the store reads
    its steps' screens from when the run is imported (equiv_f1 resolves `cd` targets with them), as LAB_REPLAY
    would make it; without one, LAB_REPLAY or the cached download as before."""
    return Settings(replay_path=replay) if replay else Settings()


def select_steps(options: RunOptions, settings: Settings):
    """(the replay source, its steps chosen by the options' mode, tasks and limit); a skipped malformed line is a
    warning, no step left is one LabError. Shared by replay, score-reference, sweep and the training callback."""
    from lab.data import load_replay

    replay_set = load_replay(options.replay, mode=options.mode, lenient=options.lenient, settings=settings)
    for problem in replay_set.problems:
        print(f"warning: skipped {problem}", file=sys.stderr)
    steps = replay_set.steps
    if options.tasks:
        wanted = set(options.tasks)
        steps = [s for s in steps if s.task_id in wanted]
    if options.limit is not None:
        steps = steps[: options.limit]
    if not steps:
        raise LabError(f"{replay_set.path}: no steps selected (check --tasks / --limit / --mode)")
    return replay_set, steps
