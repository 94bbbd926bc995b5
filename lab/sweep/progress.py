"""A sweep's progress as plain data: one snapshot per job, handed to whichever view shows it
(the terminal's bars, the Batch tab's table)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

WAITING = "waiting"  # queued until the cluster has room for it
LOADING = "loading"  # placed on a node; its engine is starting
RUNNING = "running"
REPLACING = "re-placing"  # its node (or actor) was lost; a new actor resumes from the last step received
DONE = "done"
FAILED = "failed"
STOPPED = "stopped"
FINAL = frozenset({DONE, FAILED, STOPPED})


@dataclass(frozen=True)
class JobProgress:
    """Where one job (an engine, or one shard of it) stands."""

    spec: str
    label: str  # the spec, with `[i/n]` for a shard
    done: int
    total: int  # the steps it can run: a stored run's missing steps are not counted
    state: str = WAITING
    node: str | None = None  # the Ray node it runs on, once placed
    error: str | None = None
    missing: int = 0  # selected steps it has no answer for (a stored run's), known once it is loaded


# Called after every change, with every job's snapshot in the sweep's order.
ProgressFn = Callable[[list[JobProgress]], None]


def overall(snapshots: Sequence[JobProgress]) -> tuple[int, int]:
    """Steps done and steps in all, over every job."""
    return sum(s.done for s in snapshots), sum(s.total for s in snapshots)
