"""An evaluation's time budget: a stop event that a timer sets once the budget is spent.

The replay and the reference run both take a `stop` event (lab.runs): a replay then cancels the
engine's requests in flight (an in-process engine at its next decoding step, or inside a long prefill at
its next module: lab.engines.forward_stop) and stops, a reference run between steps. What was
finished stays in the run's `.partial.jsonl` checkpoint, which `python -m lab replay --resume` continues.
"""
from __future__ import annotations

import threading
import time


class Deadline:
    """`with Deadline(seconds) as d: replay(…, stop=d.stop)`; `d.expired` says whether the budget ran out."""

    def __init__(self, budget_s: float | None, also: threading.Event | None = None) -> None:
        # a budget past what a timer can wait (inf, 1e300) is no budget: nothing could end before it
        self.budget_s = budget_s if budget_s is not None and 0 < budget_s < threading.TIMEOUT_MAX else None
        self.stop = threading.Event()  # set when the budget is spent, or when `also` (the caller's Stop) is
        self.also = also
        self.timed_out = threading.Event()
        self._timer: threading.Timer | None = None
        self._over = threading.Event()
        self.started = 0.0

    def _spent(self) -> None:
        self.timed_out.set()
        self.stop.set()

    def _follow(self) -> None:
        """Pass the caller's Stop on (never the other way: a spent budget ends this evaluation, not the caller)."""
        while not self._over.is_set():
            if self.also.wait(0.05):
                self.stop.set()
                return

    def __enter__(self) -> "Deadline":
        self.started = time.perf_counter()
        if self.budget_s is not None:
            self._timer = threading.Timer(self.budget_s, self._spent)
            self._timer.daemon = True
            self._timer.start()
        if self.also is not None:
            threading.Thread(target=self._follow, name="tb2lite-stop", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._over.set()
        if self._timer is not None:
            self._timer.cancel()

    @property
    def expired(self) -> bool:
        """The budget ran out (not a stop the caller asked for)."""
        return self.timed_out.is_set()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started
