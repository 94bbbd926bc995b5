"""What an engine is doing right now: since when it answers its current generate call and how many
tokens it has produced so far (read by the UI while a column says "generating…"), and every token it has
produced since it was made (read by a batch replay's meter, lab.runs.meter, across its generate calls)."""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class ProgressSnapshot:
    """Seconds since the current generate call began, and the tokens produced since."""

    elapsed_s: float
    tokens: int


class LiveProgress:
    """A thread-safe counter an engine updates as tokens arrive (stream chunks, decoding steps)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: float | None = None
        self._tokens = 0
        self._calls = 0
        self._produced = 0  # never reset: the tokens of every call, finished or running

    @contextmanager
    def running(self) -> Iterator[None]:
        """Around one generate call: counts from zero when no other call is running."""
        with self._lock:
            if self._calls == 0:
                self._started, self._tokens = time.perf_counter(), 0
            self._calls += 1
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                if self._calls == 0:
                    self._started = None

    def add(self, tokens: int) -> None:
        """`tokens` more tokens produced."""
        if tokens > 0:
            with self._lock:
                self._tokens += tokens
                self._produced += tokens

    def produced(self) -> int:
        """Every token produced since the engine was made (finished calls and the running one)."""
        with self._lock:
            return self._produced

    def snapshot(self) -> ProgressSnapshot | None:
        """Where the running call stands; None when the engine is not generating."""
        with self._lock:
            if self._started is None:
                return None
            return ProgressSnapshot(time.perf_counter() - self._started, self._tokens)
