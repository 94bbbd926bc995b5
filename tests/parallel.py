"""Which tests may run side by side when the suite runs on several pytest-xdist workers (scripts/test.sh).

Tests are sent to workers by group (`--dist loadgroup`), a group at a time:
- every module with a test that starts a real `vllm serve` is one group, `vllm`, so two vLLM servers
  never share this machine's two cores and KV-cache memory, and these tests run one after another
  as they were written to;
- every module with a test that starts Ray (or under tests/sweep/) is one group, `ray`: a Ray test checks
  that no raylet is left anywhere on the machine, and two Ray clusters would share /tmp/ray;
- every other module is a group of its own, so a module's fixtures (an app process, a built model) are
  made once, on one worker.

The two long groups are put first (`--no-loadscope-reorder` keeps that order), so they start at once on
two workers and the modules fill in beside them.
"""
from __future__ import annotations

import pytest

FIRST = ("vllm", "ray")  # the long groups, started first


def group_of(module: str, needs: set[str]) -> str:
    """The group of a module (its path) from the markers its tests carry."""
    if "ray" in needs or module.startswith("tests/sweep/"):
        return "ray"
    if "vllm" in needs:
        return "vllm"
    return module


def in_parallel(config: pytest.Config) -> bool:
    """True in a pytest-xdist worker of a `--dist loadgroup` run: the workers collect the tests (xdist sets
    `loadgroup` on them; their own `dist` is "no")."""
    return bool(getattr(config.option, "loadgroup", False))


def group_items(items: list[pytest.Item]) -> None:
    """Mark each test with its module's `xdist_group` and put the long groups first (stable otherwise)."""
    needs: dict[str, set[str]] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        needs.setdefault(module, set()).update(m.name for m in item.iter_markers() if m.name in FIRST)
    groups = {module: group_of(module, found) for module, found in needs.items()}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid.split("::", 1)[0]]))
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(groups[item.nodeid.split("::", 1)[0]], len(FIRST)))
