"""The UI's shared caches (Compare's columns and figures, audits, what-if sessions) are cachetools' LRU map
behind a lock: least recently used first out, a hit renews a key, `drop` by predicate, safe across threads."""
from __future__ import annotations

import threading

import cachetools

from lab.workspace import LRUCache


def test_the_cache_is_cachetools_lru():
    cache = LRUCache(3)
    assert isinstance(cache._data, cachetools.LRUCache) and cache._data.maxsize == 3 == cache.capacity


def test_least_recently_used_goes_first_and_a_hit_renews():
    cache = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.get("b") is None
    assert (cache.get("a"), cache.get("c")) == (1, 3)
    cache.put("a", 10)  # a new value for a key replaces it, no growth
    cache.put("d", 4)
    assert "c" not in cache and cache.get("a") == 10 and cache.get("d") == 4


def test_drop_removes_the_keys_a_predicate_picks():
    cache = LRUCache(8)
    for engine in ("ref", "tiny"):
        for step in ("s1", "s2"):
            cache.put((engine, step), f"{engine}/{step}")
    cache.drop(lambda key: key[1] == "s1")
    assert [k for k in [("ref", "s1"), ("tiny", "s1"), ("ref", "s2"), ("tiny", "s2")] if k in cache] == [
        ("ref", "s2"), ("tiny", "s2")]


def test_threads_writing_and_dropping_at_once_never_exceed_the_capacity():
    cache = LRUCache(50)
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(2000):
                cache.put((n, i), i)
                cache.get((n, i - 1))
                if i % 97 == 0:
                    cache.drop(lambda key: key[0] == n and key[1] % 2 == 0)
        except BaseException as exc:  # a RuntimeError "changed size during iteration" without the lock
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache._data) <= 50
