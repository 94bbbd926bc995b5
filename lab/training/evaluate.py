"""One checkpoint's evaluation: replay, optionally score the reference, import into the store, sum it up.

Everything here is the lab's own machinery (lab.runs.replay, lab.runs.reference_run, lab.store.autoimport);
this module only strings it together for one checkpoint, under a time budget, and turns whatever goes
wrong into one line, so the training that called it goes on.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab import jsontext
from lab.data.step import Step
from lab.engines.common import EngineBase
from lab.errors import LabError, os_error_line
from lab.runs.checkpoint import Checkpoint
from lab.runs.claims import TakenFn, partial_path
from lab.runs.names import finished_run_file
from lab.runs.reference_run import SUFFIX as REFERENCE_SUFFIX
from lab.runs.reference_run import ReferenceConfig, score_reference_run
from lab.runs.options import ReplaySource, RunOptions, replay_config
from lab.runs.replay import replay
from lab.training.budget import Deadline
from lab.training.metrics import checkpoint_metrics

logger = logging.getLogger("lab.training")
LINE_MAX = 400


@dataclass
class RunPlan:
    """Where and under which name one checkpoint's files go, and what they record."""

    out_dir: Path
    stem: str
    eval_path: str
    replay_fingerprint: str
    selection: dict
    replay_steps: int | None = None  # scored steps of the replay (before the selection): its coverage's denominator
    extra: dict = field(default_factory=dict)
    reference: bool = False
    budget_s: float | None = None
    taken: TakenFn | None = None  # the store's say on run names (lab.runs.claims)
    resume: bool = False  # continue the run's own checkpoint when an earlier try left one
    reference_stem: str | None = None  # the reference run's name (None: `stem`)
    reference_steps: list[Step] | None = None  # the steps the reference is scored on (None: the replayed ones)
    reference_selection: dict | None = None  # their selection as the reference file records it (None: `selection`)
    reference_extra: dict | None = None  # the reference file's other fields (None: `extra`)


@dataclass
class Outcome:
    """What one evaluation gave: its numbers, its files, and the line saying why it failed (None: it did not)."""

    metrics: dict[str, float] = field(default_factory=dict)
    result_path: Path | None = None
    reference_path: Path | None = None
    error: str | None = None
    store_line: str | None = None
    stopped: bool = False  # the caller's Stop ended it (not its budget, not a failure): to be resumed


def one_line(exc: BaseException) -> str:
    """An exception as one line: a LabError's message, else its type and first line."""
    if isinstance(exc, OSError):  # a folder that cannot be made or written, a full disk: the path and why
        return os_error_line(exc)[:LINE_MAX]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    line = text if isinstance(exc, LabError) else f"{type(exc).__name__}: {text}".rstrip(": ")
    return line[:LINE_MAX]


def _stopped_line(plan: RunPlan, engine: EngineBase, suffix: str, total: int) -> str:
    """Why a run stopped at its budget, what is kept and how to finish it."""
    stem = (plan.reference_stem or plan.stem) if suffix else plan.stem
    partial = partial_path(plan.out_dir, stem + suffix)
    done = len(Checkpoint(partial).read()[1])
    what = "its reference scoring" if suffix else "its replay"
    if not done:  # (a run stopped before its first step keeps no checkpoint: lab.runs.claims)
        return f"ran past its {plan.budget_s:g} s budget before {what} finished a step (of {total})"
    command = "score-reference" if suffix else "replay"
    return (f"ran past its {plan.budget_s:g} s budget after {done} of {total} steps of {what}; they are kept in "
            f"{partial} (finish with: python -m lab {command} --resume --name {stem} --engine '{engine.spec}' "
            f"--replay {plan.eval_path} --out {plan.out_dir})")




def evaluate_checkpoint(engine: EngineBase, steps: list[Step], plan: RunPlan,
                        import_file: Callable[[Path], str] | None = None,
                        stop: threading.Event | None = None) -> Outcome:
    """Replay `steps` on a loaded `engine` into `plan.out_dir/plan.stem.json` (and the reference file), import
    them with `import_file` when given; never raises for a failure of the evaluation itself. `stop`: the
    caller's own Stop (the budget sets it too); `outcome.stopped` says the caller's Stop ended it."""
    outcome = Outcome()
    ref_stem = plan.reference_stem or plan.stem
    with Deadline(plan.budget_s, stop) as deadline:
        try:
            # the name is claimed as given (checked free just before: lab.training.naming), never replaced
            run = RunOptions(replay=plan.eval_path, resume=plan.resume)  # the engine's SPEC carries the sampling
            source = ReplaySource(plan.eval_path, plan.replay_fingerprint, plan.replay_steps)
            config = replay_config(run, engine, source, plan.out_dir, run_name=plan.stem, name_given=True,
                                   selection=plan.selection, extra=plan.extra, taken=plan.taken)
            done = finished_run_file(plan.out_dir, plan.stem) if plan.resume else None
            outcome.result_path = done or replay(engine, steps, config, stop=deadline.stop)
            if plan.reference:
                ref = ReferenceConfig(out_dir=plan.out_dir, run_name=ref_stem, replay_fingerprint=plan.replay_fingerprint,
                                      selection=plan.reference_selection or plan.selection, eval_path=plan.eval_path,
                                      extra=plan.reference_extra if plan.reference_extra is not None else plan.extra,
                                      name_given=True, taken=plan.taken, resume=plan.resume)
                done = finished_run_file(plan.out_dir, ref_stem + REFERENCE_SUFFIX) if plan.resume else None
                outcome.reference_path = done or score_reference_run(engine, plan.reference_steps or steps, ref,
                                                                     stop=deadline.stop)
        except Exception as exc:  # noqa: BLE001 - any failure of the evaluation is a line; training goes on
            if deadline.expired:
                suffix = REFERENCE_SUFFIX if outcome.result_path is not None else ""
                total = len(plan.reference_steps or steps) if suffix else len(steps)
                outcome.error = _stopped_line(plan, engine, suffix, total)
            elif stop is not None and stop.is_set():
                outcome.stopped, outcome.error = True, "stopped before it finished; what it finished is kept"
            else:
                outcome.error = one_line(exc)
    files = [p for p in (outcome.result_path, outcome.reference_path) if p is not None]
    aggregates = [jsontext.loads(p.read_bytes()).get("aggregate") for p in files]
    outcome.metrics = checkpoint_metrics(aggregates[0] if files else None,
                                         aggregates[1] if len(files) > 1 else None)
    if import_file is not None and files:
        outcome.store_line = "; ".join(import_file(p) for p in files)
    return outcome
