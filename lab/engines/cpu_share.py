"""Which engines are generating on this machine's CPUs right now, and the share of them each one gets.

An in-process engine (`transformers:` on CPU) sizes torch's intra-op threads by this count: alone it
keeps every thread torch started with; beside another local CPU engine generating at the same time
(a second in-process engine, a `vllm:` or `transformers-serve:` server on CPU) it takes its share, so
the processes do not oversubscribe the cores (OpenMP threads spin-waiting for a descheduled sibling
made the in-process engine several times slower in the app than alone in `python -m lab replay`).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_active: dict[int, int] = {}  # id(engine) -> generate calls running (an engine may be called from two threads)


@contextmanager
def generating(engine: object) -> Iterator[None]:
    """Count `engine` as generating on the local CPUs while the block runs."""
    key = id(engine)
    with _lock:
        _active[key] = _active.get(key, 0) + 1
    try:
        yield
    finally:
        with _lock:
            left = _active.get(key, 1) - 1
            if left > 0:
                _active[key] = left
            else:
                _active.pop(key, None)


def active_engines() -> int:
    """How many engines are generating on the local CPUs now."""
    with _lock:
        return len(_active)


def thread_share(total: int) -> int:
    """Threads one in-process engine uses out of `total` now: an equal share per generating engine, at least 1."""
    return max(1, int(total) // max(1, active_engines()))
