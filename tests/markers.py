"""Mark each collected test by what it needs (browser, vllm, ray, podman, slow), read from what it uses.

The rules are data (tests/markers.yaml): a marker's names are fixtures or functions. A test gets
the marker when its fixture closure holds one of the names, or when its own code, a fixture's code or
a `tests.*` helper reached from either (followed through calls, nested functions and
`@contextmanager`) names one. So a new test that uses the same fixtures or helpers is marked too;
a test that needs something else says so with an explicit `@pytest.mark.X`.
"""
from __future__ import annotations

import inspect
import types
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import pytest
import yaml

RULES: dict[str, frozenset[str]] = {
    marker: frozenset(names)
    for marker, names in yaml.safe_load((Path(__file__).with_name("markers.yaml")).read_text()).items()
}
ALL_NAMES = frozenset().union(*RULES.values())


def _code_objects(code: types.CodeType) -> Iterable[types.CodeType]:
    """`code` and the code of every function, lambda or comprehension defined inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _unwrap(obj: object) -> types.FunctionType | None:
    """The plain function behind a test helper (through decorators such as @contextmanager)."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    return obj if isinstance(obj, types.FunctionType) else None


@lru_cache(maxsize=None)
def names_reached(func: types.FunctionType) -> frozenset[str]:
    """Every name `func` uses, and those of the `tests.*` functions it calls, transitively."""
    seen: set[types.FunctionType] = set()
    found: set[str] = set()
    todo = [func]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for code in _code_objects(current.__code__):
            for name in code.co_names:
                found.add(name)
                target = _unwrap(current.__globals__.get(name))
                if target is not None and (target.__module__ or "").startswith("tests") and target not in seen:
                    todo.append(target)
    return frozenset(found & ALL_NAMES)


def needs(item: pytest.Item) -> set[str]:
    """The markers `item` earns from its fixtures and the code it runs."""
    names: set[str] = set(getattr(item, "fixturenames", ()))
    func = _unwrap(getattr(item, "function", None))
    if func is not None:
        names |= names_reached(func)
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        for fixturedef in defs:
            fixture_func = _unwrap(fixturedef.func)
            if fixture_func is not None and (fixture_func.__module__ or "").startswith("tests"):
                names |= names_reached(fixture_func)
    return {marker for marker, rule in RULES.items() if names & rule}


def mark_items(items: list[pytest.Item]) -> None:
    """Add the markers each test earns (explicit ones stay)."""
    for item in items:
        have = {mark.name for mark in item.iter_markers()}
        for marker in sorted(needs(item) - have):
            item.add_marker(marker)


RERUNS = 1  # for a test that drives real processes: one with any marker of RULES


def allow_reruns(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test that drives real processes one rerun (pytest-rerunfailures' `flaky` marker): a failure
    that does not come again does not fail the run but is still shown, with its traceback and output, at the
    end (tests/reruns.py). Tests of the lab's own code alone get none: a failure there is never luck."""
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        have = {mark.name for mark in item.iter_markers()}
        if have & RULES.keys() and "flaky" not in have:
            item.add_marker(pytest.mark.flaky(reruns=RERUNS, reruns_delay=2))
