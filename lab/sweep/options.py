"""Per-engine replay options of a sweep (`JobOptions`), shipped to workers as they are."""
from __future__ import annotations

from dataclasses import dataclass, field

from lab.runs.options import ReplaySource, RunOptions

# what a sweep runs on each engine: its answers (a replay), or its likelihood of the reference answers
ANSWERS, REFERENCE = "answers", "reference"
WHAT = (ANSWERS, REFERENCE)


@dataclass(frozen=True)
class JobOptions:
    """What a worker needs to build the ReplayConfig that `replay` would build (lab.runs.options.replay_config),
    or the ReferenceConfig of `score-reference` when `what` is REFERENCE."""

    run: RunOptions
    source: ReplaySource
    run_name: str | None = None  # the name the sweep gives this engine's run (None: its engine's)
    extra: dict = field(default_factory=dict)  # more top-level fields of its file (a shard's)
    what: str = ANSWERS
    only: frozenset[str] | None = None  # a race's round: these steps now, the rest stay for later rounds
