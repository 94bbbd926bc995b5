"""The terminal's view of a sweep's progress: one tqdm bar per job and one overall."""
from __future__ import annotations

import sys

from tqdm import tqdm

from lab.sweep.progress import REPLACING, JobProgress, overall


class TerminalBars:
    """A ProgressFn drawing tqdm bars on stderr; a lost node is said once per loss."""

    def __init__(self) -> None:
        self.overall: tqdm | None = None
        self.bars: list[tqdm] = []
        self.states: list[str] = []

    def __call__(self, snapshots: list[JobProgress]) -> None:
        if self.overall is None:
            self.overall = tqdm(total=overall(snapshots)[1], desc="sweep", unit="step", file=sys.stderr, position=0)
            self.bars = [tqdm(total=s.total, desc=s.label, unit="step", file=sys.stderr, position=i + 1, leave=False)
                         for i, s in enumerate(snapshots)]
            self.states = [s.state for s in snapshots]
        for i, (bar, snap) in enumerate(zip(self.bars, snapshots)):
            if snap.state == REPLACING and self.states[i] != REPLACING:
                tqdm.write(f"{snap.spec}: its node was lost; re-placing it (resumes from the last step received)",
                           file=sys.stderr)
            self.states[i] = snap.state
            if (bar.n, bar.total) != (snap.done, snap.total):  # a stored run's total drops to the steps it has
                bar.n, bar.total = snap.done, snap.total
                bar.refresh()
        done, total = overall(snapshots)
        if (self.overall.n, self.overall.total) != (done, total):
            self.overall.n, self.overall.total = done, total
            self.overall.refresh()

    def close(self) -> None:
        for bar in self.bars:
            bar.close()
        if self.overall is not None:
            self.overall.close()
