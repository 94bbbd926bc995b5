"""Answers being generated now, by (engine, step): each started once, whichever Generate asked first, and
seen by every later look at that step. A second Generate (or a reload, the tab shown again, the step opened
again from another) awaits the answer already running instead of starting another or calling the column
"not generated yet"; the generation itself belongs to no page and goes on when a page closes."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

Key = tuple[str, str]  # (engine name, step key)


@dataclass
class Job:
    """One answer being generated: its engine (for the tokens so far), when it began, and its column once done."""

    name: str
    step_key: str
    engine: Any
    started: float = field(default_factory=time.monotonic)
    view: Any = None  # the EngineView it ended with (an answer, or the error shown in its column)
    done: threading.Event = field(default_factory=threading.Event)
    _callbacks: list[Callable[["Job"], None]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def when_done(self, callback: Callable[["Job"], None]) -> None:
        """Call `callback(job)` once the answer is in (at once when it is already)."""
        with self._lock:
            if not self.done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def finish(self, view: Any) -> None:
        with self._lock:
            self.view = view
            self.done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class Inflight:
    """The jobs of one lab (thread-safe): `start` one per (engine, step), `running` to show it in progress."""

    def __init__(self) -> None:
        self._jobs: dict[Key, Job] = {}
        self._lock = threading.Lock()

    def start(self, name: str, step_key: str, engine: Any, work: Callable[[], Any]) -> Job:
        """The job answering (name, step_key): the one running already, else a new one running `work()` in a
        thread of its own (its result, the column, is the job's view)."""
        key = (name, step_key)
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                return job
            job = self._jobs[key] = Job(name, step_key, engine)

        def run() -> None:
            view = None
            try:
                view = work()
            finally:
                with self._lock:
                    if self._jobs.get(key) is job:
                        del self._jobs[key]
                job.finish(view)

        threading.Thread(target=run, name=f"lab-answer-{name}", daemon=True).start()
        return job

    def running(self, name: str, step_key: str) -> Job | None:
        """The job answering (name, step_key) now, or None."""
        with self._lock:
            return self._jobs.get((name, step_key))

    def running_on(self, step_key: str) -> list[Job]:
        """Every job answering step `step_key` now."""
        with self._lock:
            return [job for (_, key), job in self._jobs.items() if key == step_key]


_CREATE = threading.Lock()


def inflight_of(ctx: Any) -> Inflight:
    """The lab's registry of answers in flight (made on first use, kept on the context)."""
    with _CREATE:
        if getattr(ctx, "inflight", None) is None:
            ctx.inflight = Inflight()
        return ctx.inflight
