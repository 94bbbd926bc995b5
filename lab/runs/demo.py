"""`python -m lab demo`: two runs on the demonstration's synthetic replay (lab.runs.demo_replay) whose true
difference is known by construction, replayed and scored by the lab's own pipeline, so a newcomer without
the full replay or a model still sees a comparison with its interval.

How the answers are made: on each task the baseline answers a step exactly (the reference reply) with a
chance drawn per task, the candidate with that chance plus a fixed gap; otherwise both give the same wrong
answer (the reference's first command, then a command that is not in it), scored by the real scorer. The
candidate's expected lead is the gap times the mean of (1 − a wrong answer's F1) over the steps: the gap is
chosen so that lead equals --difference points. The two runs share most of their draws (checkpoints of one
model agree on most steps), so some steps still regress."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lab.data import load_replay
from lab.data.step import Step
from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig, OnDone
from lab.errors import LabError
from lab.prompts.contracts import get_contract
from lab.runs.demo_replay import DemoSettings, demo_records, demo_settings, reply, write_replay
from lab.runs.pipeline import parse_reference
from lab.runs.replay import ReplayConfig, replay
from lab.scoring.metrics import score_batch
from lab.tb2lite import CORRECTED

KIND = "synthetic"


class SyntheticAnswers(EngineBase):
    """Answers each step with the synthetic answer chosen for it in advance; runs no model. Not an engine
    kind a SPEC can name: only the demonstration makes one."""

    kind = KIND
    usage = "python -m lab demo"
    answers_from_data = True
    takes_target = False
    OPTIONS: dict[str, str] = {}

    def __init__(self, name: str, answers: dict[str, str]) -> None:
        super().__init__(EngineConfig(spec=f"{KIND}:{name}", kind=KIND, target=name),
                         model_id=name, name=name)
        self.name_given = True
        self.answers = answers

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        results: list = [None] * len(requests)
        for i, request in enumerate(requests):
            start = time.perf_counter()
            completion = Completion(text=self.answers[request.step.key], finish_reason="stop")
            completion.latency_s = time.perf_counter() - start
            self.finish(i, completion, results, on_done)
        return results

    def describe(self) -> EngineInfo:
        return EngineInfo(kind=self.kind, model=self.model_id, device="none",
                          notes="synthetic answers of `python -m lab demo`, not a model's")


@dataclass(frozen=True)
class DemoPair:
    """What the demonstration wrote: its replay, its two runs, and their true difference."""

    replay: Path
    replay_sha256: str
    baseline: Path
    candidate: Path
    difference: float  # the candidate's expected lead in points, by construction
    chance_gap: float  # how much likelier the candidate answers a step exactly, on every task
    steps: int
    tasks: int


def _miss(step: Step, miss_command: str) -> str:
    """The wrong answer both runs give at a step they miss: the reference's first command, then one not in it."""
    units = list(parse_reference(step).command_units)
    return reply(units[:1] + [miss_command] if len(units) > 1 else [miss_command], "synthetic wrong answer", False)


def _chance_gap(steps: list[Step], misses: dict[str, str], difference: float) -> float:
    """The gap in the chance of answering exactly that makes the expected lead `difference` points."""
    parse = get_contract(None).parse
    pairs = [(parse(misses[s.key]).command_units, parse_reference(s).command_units) for s in steps]
    lost = float(np.mean([1.0 - m.f1 for m in score_batch(pairs, CORRECTED)]))
    return difference / 100.0 / lost


def _answers(settings: DemoSettings, steps: list[Step], misses: dict[str, str], gap: float,
             seed: int) -> tuple[dict[str, str], dict[str, str]]:
    """(baseline answers, candidate answers) by step key."""
    rng = np.random.default_rng([seed, 1])
    tasks = sorted({s.task_id for s in steps})
    chance = dict(zip(tasks, rng.uniform(*settings.baseline_right, size=len(tasks))))
    if any(not 0.0 <= p + gap <= 1.0 for p in chance.values()):
        raise LabError(f"--difference: a lead this large needs a chance above 1 or below 0 on some task; give at "
                       f"most {settings.max_difference:g} points either way")
    first = rng.random(len(steps))
    shared = rng.random(len(steps)) < settings.same_draw
    second = np.where(shared, first, rng.random(len(steps)))
    base, cand = {}, {}
    for i, step in enumerate(steps):
        p = chance[step.task_id]
        base[step.key] = step.ref_raw if first[i] < p else misses[step.key]
        cand[step.key] = step.ref_raw if second[i] < p + gap else misses[step.key]
    return base, cand


def check_difference(difference: float) -> None:
    limit = demo_settings().max_difference
    if not np.isfinite(difference) or abs(difference) > limit:
        raise LabError(f"--difference {difference}: give a number of points from -{limit:g} to {limit:g}")


def build_demo(results_dir: Path, difference: float | None = None, seed: int | None = None) -> DemoPair:
    """Write the demonstration's replay and its two runs under `<results_dir>/<folder>` (replacing the ones a
    previous demonstration wrote there)."""
    settings = demo_settings()
    difference = settings.difference if difference is None else float(difference)
    seed = settings.seed if seed is None else int(seed)
    check_difference(difference)
    folder = Path(results_dir) / settings.folder
    replay_path = write_replay(folder / settings.replay_file, demo_records(settings, seed))
    replay_set = load_replay(str(replay_path))
    steps = replay_set.steps
    misses = {s.key: _miss(s, settings.miss_command) for s in steps}
    gap = _chance_gap(steps, misses, difference)
    answers = dict(zip((settings.baseline, settings.candidate), _answers(settings, steps, misses, gap, seed)))
    marker = {"demo": "python -m lab demo", "true_difference_points": difference, "chance_gap": round(gap, 4),
              "seed": seed, "note": "synthetic answers on synthetic tasks: not a model, not TB2-lite"}
    paths = []
    for name, by_key in answers.items():
        engine = SyntheticAnswers(name, by_key)
        engine.load()
        config = ReplayConfig(out_dir=folder, eval_path=str(replay_path), run_name=name, name_given=True,
                              overwrite=True, replay_fingerprint=replay_set.fingerprint, replay_steps=len(steps),
                              selection={"mode": CORRECTED, "tasks": None, "limit": None},
                              extra={"synthetic": marker})
        try:
            paths.append(replay(engine, steps, config))
        finally:
            engine.close()
    return DemoPair(replay_path, replay_set.fingerprint, paths[0], paths[1], difference, gap, len(steps),
                    len({s.task_id for s in steps}))
