"""Statistics shared by every visitor and kept until the store changes.

One `cachetools` LRU map holds every comparison, ranking, series and the store's StatsTable, keyed by the
store's file and *generation* (lab.store.connection: any write by any process changes it) and what was asked.
When a store's generation moves on, what was kept for the older one is dropped. Two visitors asking for the
same thing while it is being computed wait for the one computation (cachetools' `condition`), and only a
computation not kept already goes through `admit` (the per-visitor limits of a public lab, lab.visitors; the
store's matrix itself is read without: everybody waits for it) — the computing itself is never under the
store's lock: the caller's `hold` is taken only to read.

Computations run one at a time on one worker thread with single-threaded BLAS, the asking thread waiting for
it: one core is left to everybody else's clicks. (A lower scheduling priority for the worker made things worse
on a loaded machine: it holds the interpreter's lock between numpy's steps, and others wait for it to run.)
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, Callable, ContextManager

import cachetools

from lab.store.db import Store
from lab.analysis.run_matrix import Hold, StatsTable, read_table

Admit = Callable[[], ContextManager]
CACHE_SIZE = 100_000  # comparisons kept (a baseline against 1,000 runs is 1,000 of them; the matrix counts 1)


def _weight(value: Any) -> int:
    """What a kept value counts for against CACHE_SIZE: its comparisons (its length), however it is packed."""
    if isinstance(value, tuple):
        return max(1, sum(_weight(v) for v in value))
    return max(1, len(value)) if isinstance(value, (list, dict)) else 1


_kept: cachetools.LRUCache = cachetools.LRUCache(maxsize=CACHE_SIZE, getsizeof=_weight)
_condition = threading.Condition()
_generation: dict[str, tuple] = {}  # store file -> the generation kept for it


_inside = threading.local()


def _mark_worker() -> None:
    _inside.worker = True


_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-statistics", initializer=_mark_worker)


def _run(make: Callable[[], Any]) -> Any:
    from lab.scoring.metrics import single_threaded_blas

    with single_threaded_blas():
        return make()


@cachetools.cached(_kept, key=lambda key, make, admit, background: key, condition=_condition)
def _computed(key: tuple, make: Callable[[], Any], admit: Admit, background: bool) -> Any:
    with admit():
        if not background or getattr(_inside, "worker", False):
            return make()
        return _worker.submit(_run, make).result()


def _forget_older(path: str, generation: tuple) -> None:
    """Drop what was kept for an older generation of this store."""
    with _condition:
        if _generation.get(path) == generation:
            return
        for key in [k for k in list(_kept) if k[0] == path and k[1] != generation]:
            _kept.pop(key, None)
        _generation[path] = generation


def shared(store: Store, key: tuple, make: Callable[[], Any], admit: Admit = nullcontext, *,
           background: bool = True) -> Any:
    """`make()`, computed once for everybody until the store changes, on the statistics worker (`background`;
    False: in the asking thread, for reads under the store's lock); `admit()` is entered around a
    computation (not around a value already kept)."""
    path, generation = str(store.path), store.connector.generation()
    _forget_older(path, generation)
    return _computed((path, generation, *key), make, admit, background)


def stats_table(store: Store, hold: Hold = nullcontext) -> StatsTable:
    """The store's StatsTable of this generation (read under `hold` when not kept). Not admitted: a read bounded
    by the store's size, once per generation, that every statistic and every visitor waits for."""
    return shared(store, ("table",), lambda: read_table(store, hold), background=False)


def clear() -> None:
    """Forget everything kept (tests and benchmarks that time a first computation)."""
    with _condition:
        _kept.clear()
        _generation.clear()
