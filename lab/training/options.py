"""The options of an evaluation while training, checked once when the callback is made (one LabError line each).

A mistake (an unknown preset, an engine option the engine does not take, no step selected, a replay
file that is not there) surfaces at the line that builds the callback, before any training, never hours
later at the first save.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab.errors import LabError
from lab.settings import Settings
from lab.tb2lite import CORRECTED

OPTIONS_PATH = Path(__file__).with_name("options.yaml")
# SPEC option names an in-memory evaluation sets itself: the model is used where it sits, as it is
IN_MEMORY_OWN = ("device", "dtype", "lora", "name")


@functools.lru_cache(maxsize=1)
def training_defaults() -> dict:
    """lab/training/options.yaml."""
    return yaml.safe_load(OPTIONS_PATH.read_text(encoding="utf-8"))


@dataclass
class EvalOptions:
    """What to replay at each checkpoint, on which engine, where the files go and how long it may take."""

    replay: str | None = None
    results: Path | None = None
    tasks: list[str] | None = None
    limit: int | None = None
    mode: str = CORRECTED
    engine: str = "transformers"
    preset: str | None = None
    reference: bool = False
    max_tokens: int | None = None
    engine_options: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    every_steps: int | None = None
    time_budget_s: float | None = None
    base_model: str | None = None
    store: bool | None = None

    def __post_init__(self) -> None:
        engines = training_defaults()["engines"]
        if self.engine not in engines:
            raise LabError(f"engine={self.engine!r}: use one of {', '.join(engines)}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            raise LabError(f"limit={self.limit!r}: give a whole number of steps, at least 1 (or None for all)")
        if self.every_steps is not None and (not isinstance(self.every_steps, int) or self.every_steps < 1):
            raise LabError(f"every_steps={self.every_steps!r}: give a whole number of optimizer steps, at least 1")
        if self.every_steps is not None and not self.in_memory:
            raise LabError("every_steps evaluates the model in memory between saves: it needs engine='transformers' "
                           "(vLLM reads saved checkpoints only)")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            raise LabError(f"max_tokens={self.max_tokens!r}: give a whole number of new tokens, at least 1")
        budget = self.time_budget_s if self.time_budget_s is not None else training_defaults()["time_budget_s"]
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or not budget > 0):
            raise LabError(f"time_budget_s={budget!r}: give a positive number of seconds (or None for no budget)")
        self.time_budget_s = float(budget) if budget is not None else None
        self.engine_options = {str(k): str(v) for k, v in (self.engine_options or {}).items()}
        for key, value in self.engine_options.items():
            if any(c in key + value for c in "&?#") or "=" in key:
                raise LabError(f"engine_options {key!r}: {value!r}: names and values may not hold '&', '?', '#' "
                               "(a name no '=')")
        if self.in_memory:
            own = sorted(set(self.engine_options) & set(IN_MEMORY_OWN))
            if own:
                raise LabError(f"engine_options {own}: engine='transformers' replays the model in memory as it is "
                               "(its device, dtype and adapter); leave these out")
        if self.name is not None and not str(self.name).strip():
            raise LabError("name='': give the series a name, or None for the trainer's run name")
        self.results = Path(self.results).expanduser() if self.results is not None else Settings().runs_dir

    @property
    def in_memory(self) -> bool:
        """Whether the evaluation replays the model in the trainer's memory (an in-process engine kind:
        transformers); a server engine (vllm) runs apart from the trainer and reads saved checkpoints."""
        from lab.engines.registry import engine_class

        return not engine_class(self.engine).managed

    def spec_options(self) -> dict[str, str]:
        """The SPEC options every checkpoint's engine gets: the preset, the user's, max_tokens."""
        options = {"preset": self.preset} if self.preset else {}
        options.update(self.engine_options)
        if self.max_tokens is not None:
            options["max_tokens"] = str(self.max_tokens)
        return options

    def imports_into_store(self, settings: Settings) -> bool:
        """Whether each file goes into the lab's store as it is written: `store` when given, else when the
        results folder is the lab's runs folder or inside its results folder (which the store reads)."""
        if self.store is not None:
            return bool(self.store)
        out = Path(self.results).resolve()
        runs, results = Path(settings.runs_dir).resolve(), Path(settings.results_dir).resolve()
        return out == runs or out.is_relative_to(results)


def engine_spec(kind: str, target: str, options: dict[str, str]) -> str:
    """`KIND:TARGET?key=value&…`, the SPEC `python -m lab replay --engine` takes for the same checkpoint."""
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"{kind}:{target}" + (f"?{query}" if query else "")
