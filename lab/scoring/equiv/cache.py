"""A thread-safe LRU map bounded by the characters it holds, not by its entry count: equiv's caches
key on command units a hostile server or file writes, so one entry may be 10,000 characters."""
from __future__ import annotations

import threading
from typing import Callable, Hashable, TypeVar

import cachetools

V = TypeVar("V")
MISSING = object()


class SizedCache:
    """`get`/`put` of values whose size (characters) the caller states; an entry larger than a tenth
    of the capacity is not kept (computing it again costs about what it costs the first time)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._data: cachetools.LRUCache = cachetools.LRUCache(maxsize=max_chars, getsizeof=lambda v: v[0])
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: object = None) -> object:
        """The value kept for `key` (which may be None), else `default`."""
        with self._lock:
            found = self._data.get(key)  # (chars, value): never None itself
        return default if found is None else found[1]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def put(self, key: Hashable, value: V, chars: int) -> V:
        """Keep `value` (about `chars` characters with its key) unless it is too large to keep; returns it."""
        if chars <= self.max_chars // 10:
            with self._lock:
                self._data[key] = (max(1, chars), value)
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], V], chars: int) -> V:
        found = self.get(key, MISSING)
        return self.put(key, make(), chars) if found is MISSING else found  # type: ignore[return-value]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)
