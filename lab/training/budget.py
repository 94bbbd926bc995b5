"""An evaluation's time budget: a stop event that a timer sets once the budget is spent.

The replay and the reference run both take a `stop` event (lab.runs): a replay then cancels the
engine's requests in flight and stops between chunks, a reference run between steps. What was
finished stays in the run's `.partial.jsonl` checkpoint, which `python -m lab replay --resume` continues.
"""
from __future__ import annotations

import threading
import time


class Deadline:
    """`with Deadline(seconds) as d: replay(…, stop=d.stop)`; `d.expired` says whether the budget ran out."""

    def __init__(self, budget_s: float | None) -> None:
        self.budget_s = budget_s
        self.stop = threading.Event()
        self._timer: threading.Timer | None = None
        self.started = 0.0

    def __enter__(self) -> "Deadline":
        self.started = time.perf_counter()
        if self.budget_s is not None:
            self._timer = threading.Timer(self.budget_s, self.stop.set)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    @property
    def expired(self) -> bool:
        return self.stop.is_set()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started
