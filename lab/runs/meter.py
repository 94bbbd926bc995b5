"""A batch replay's live figures between finished steps: the tokens generated so far, tokens a second, and an
estimate of the time left, from the engine's own count of the tokens it produces (lab.engines.progress).

A small model on a small CPU may take minutes a step (docs/getting-started.md quotes a measured one), and a
batch of four moves the step count only when all four end; these figures move with every token.

The estimate is the tokens still to generate divided by the tokens a second measured since the replay began
generating. Tokens still to generate: the steps left times the tokens a step, less the tokens already
generated for steps not finished yet. The tokens a step are the mean of the steps finished so far; until one
has finished, `max_tokens` (times the samples a step), the most an answer may take, so that first estimate is
an upper bound and says so.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from lab.engines.progress import LiveProgress


@dataclass(frozen=True)
class LiveFigures:
    """Where a replay's generation stands: tokens since it began, their rate, and the time left (estimated)."""

    tokens: int
    elapsed_s: float
    tokens_per_s: float | None  # None until the first token
    left_s: float | None  # estimated seconds left; None until the first token
    per_step_tokens: float  # the tokens a step the estimate counts with
    bound: bool  # no step finished yet: every step counted at max_tokens, left_s is an upper bound
    steps_left: int = 0  # steps not finished yet


def step_tokens(per_step: dict) -> int:
    """The tokens one finished step generated: its answer's, or all its samples' (lab.runs.samples)."""
    samples = per_step.get("samples")
    if isinstance(samples, list) and samples:
        return sum(int(s.get("completion_tokens") or 0) for s in samples if isinstance(s, dict))
    return int(per_step.get("completion_tokens") or 0)


class ReplayMeter:
    """Updated by the replay (begin, step_done), read from any thread (figures)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._progress: LiveProgress | None = None
        self._base = 0  # the engine's produced() when the replay began
        self._started = 0.0
        self._steps_left = 0
        self._bound = 0  # tokens a step at most (max_tokens x samples)
        self._finished = 0  # steps finished since begin
        self._finished_tokens = 0

    def begin(self, progress: LiveProgress, steps: int, max_step_tokens: int) -> None:
        """The replay starts generating `steps` steps of at most `max_step_tokens` tokens each."""
        with self._lock:
            self._progress, self._base, self._started = progress, progress.produced(), self._clock()
            self._steps_left, self._bound = steps, max(int(max_step_tokens), 1)
            self._finished = self._finished_tokens = 0

    def step_done(self, tokens: int) -> None:
        """One step finished, having generated `tokens` tokens."""
        with self._lock:
            self._finished += 1
            self._finished_tokens += max(int(tokens), 0)

    def figures(self) -> LiveFigures | None:
        """The figures now; None before begin() (a stored run generates nothing)."""
        with self._lock:
            if self._progress is None:
                return None
            tokens = max(self._progress.produced() - self._base, 0)
            elapsed = max(self._clock() - self._started, 0.0)
            bound = self._finished == 0
            per_step = float(self._bound) if bound else self._finished_tokens / self._finished
            left_steps = max(self._steps_left - self._finished, 0)
            in_flight = max(tokens - self._finished_tokens, 0)  # generated for steps not finished yet
        if tokens == 0 or elapsed <= 0:
            return LiveFigures(tokens, elapsed, None, None, per_step, bound, left_steps)
        rate = tokens / elapsed
        to_go = max(left_steps * per_step - in_flight, 0.0) if left_steps else 0.0
        return LiveFigures(tokens, elapsed, rate, to_go / rate, per_step, bound, left_steps)


def duration(seconds: float, compact: bool = False) -> str:
    """`45 s`, `12 min`, `2 h 05 min` (compact: `45s`, `12m`, `2h05m`)."""
    s = max(int(round(seconds)), 0)
    if s < 120:
        return f"{s}s" if compact else f"{s} s"
    if s < 90 * 60:
        m = int(round(s / 60))
        return f"{m}m" if compact else f"{m} min"
    h, m = divmod(int(round(s / 60)), 60)
    return f"{h}h{m:02d}m" if compact else f"{h} h {m:02d} min"


def describe(figures: LiveFigures | None, compact: bool = False) -> str:
    """The figures as a line: tokens, tokens a second, the time left said as an estimate (and as a bound
    until a step finishes). `compact`: for a terminal's progress bar. Empty without figures."""
    if figures is None:
        return ""
    if figures.tokens_per_s is None or figures.left_s is None:
        return "no token yet (reading the prompt)" if not compact else "no token yet"
    rate = figures.tokens_per_s
    rate_text = f"{rate:.1f}" if rate < 100 else f"{rate:,.0f}"
    took = f"{figures.tokens:,} {'tok,' if compact else 'tokens ·'} {rate_text} tok/s"
    if not figures.steps_left:  # every step finished: what it took, no time left to estimate
        return took
    if compact:
        left = duration(figures.left_s, compact=True)
        when = f"<={left} left (est., {figures.per_step_tokens:,.0f} tok/step max)" if figures.bound \
            else f"~{left} left (est.)"
        return f"{took}, {when}"
    left = duration(figures.left_s)
    when = (f"at most about {left} left (estimate: every step counted at its {figures.per_step_tokens:,.0f}-token "
            "limit until one finishes)") if figures.bound else \
        f"about {left} left (estimate: {figures.per_step_tokens:,.0f} tokens a step so far)"
    return f"{took} · {when}"


@contextmanager
def ticking(fn: Callable[[], None], every_s: float) -> Iterator[None]:
    """Call `fn` every `every_s` seconds from a thread while the block runs (a bar between finished steps)."""
    over = threading.Event()

    def run() -> None:
        while not over.wait(every_s):
            fn()

    thread = threading.Thread(target=run, name="lab-meter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        over.set()
        thread.join(timeout=every_s + 5)
