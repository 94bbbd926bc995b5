"""What every evaluation of a series replays and where its files go, written once into the series' state folder
(`plan.json`) so the worker beside training, and `python -m lab training finish` in another shell later, make
exactly the evaluations the callback asked for: the callback's options, the replay (its path and sha256, which
must not have changed), the series' name, the subset of tasks, the budget, and the lab's folders (results,
runs, store) as the training process saw them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from lab.data.step import Step
from lab.errors import LabError
from lab.settings import Settings
from lab.training.options import EvalOptions
from lab.training.steps import training_steps
from lab.training.subset import subset_steps

PLAN_VERSION = 1


@dataclass
class SeriesPlan:
    """plan.json (module docstring)."""

    options: dict
    series: str
    replay_path: str
    replay_fingerprint: str
    replay_steps: int
    selection: dict
    subset: dict | None
    budget_s: float | None
    settings: dict
    output_dir: str
    cwd: str = ""  # the training's working folder: relative paths in its options (a base model, a tokenizer) read from it
    version: int = PLAN_VERSION

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SeriesPlan":
        if data.get("version") != PLAN_VERSION:
            raise LabError(f"plan.json version {data.get('version')!r}: written by another version of the lab "
                           f"(this one reads {PLAN_VERSION})")
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def eval_options(self) -> EvalOptions:
        return EvalOptions(**self.options)

    def lab_settings(self) -> Settings:
        """The lab's settings the training process had (its results folder, runs folder and store)."""
        return Settings(results_dir=Path(self.settings["results_dir"]), runs_dir=Path(self.settings["runs_dir"]),
                        db_path=Path(self.settings["db_path"]), replay_path=self.replay_path)

    def steps(self) -> tuple[list[Step], list[Step]]:
        """(the selection's steps, the subset's steps or the same list without a subset), from the replay file,
        which must be the one the series began with."""
        options = self.eval_options().model_copy(update={"replay": self.replay_path})
        replay_set, steps, _ = training_steps(options, self.lab_settings())
        if replay_set.fingerprint != self.replay_fingerprint:
            raise LabError(f"{self.replay_path}: the replay file changed since this training run began (sha256 "
                           f"{replay_set.fingerprint[:12]}…, then {self.replay_fingerprint[:12]}…); evaluations of one "
                           "series must replay the same steps")
        return steps, (subset_steps(steps, self.subset["tasks"]) if self.subset else steps)


def local_path(source: str) -> str:
    """A replay source that is a file here, as an absolute path (a worker or `finish` may start elsewhere)."""
    path = Path(source)
    return str(path.absolute()) if path.is_file() else source


def settings_record(settings: Settings) -> dict:
    return {"results_dir": str(Path(settings.results_dir).resolve()), "runs_dir": str(Path(settings.runs_dir).resolve()),
            "db_path": str(Path(settings.db_path).resolve())}
