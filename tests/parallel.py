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
two workers; pytest-xdist gives a worker its next group when it has two tests or fewer left, so the other
modules fill in behind whichever long group ends first. They follow heaviest first (most tests that start
a server, a browser, a container or a cluster: the `slow`, `browser`, `podman` markers), so the last
groups handed out are quick ones and the two workers end close together.
"""
from __future__ import annotations

import pytest

FIRST = ("vllm", "ray")  # the long groups, started first
HEAVY = ("slow", "browser", "podman")  # a test with one of these markers counts as heavy when ordering groups


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


def group_order(weights: dict[str, int]) -> dict[str, int]:
    """The place of each group (its heavy tests in `weights`) in the run: the long groups first, in FIRST's
    order, then the others by weight, heaviest first (ties keep their collection order)."""
    others = sorted((g for g in weights if g not in FIRST), key=lambda g: -weights[g])
    ordered = [g for g in FIRST if g in weights] + others
    return {group: place for place, group in enumerate(ordered)}


def group_items(items: list[pytest.Item]) -> None:
    """Mark each test with its module's `xdist_group` and order the groups (group_order; stable inside one)."""
    needs: dict[str, set[str]] = {}
    heavy: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        names = {m.name for m in item.iter_markers()}
        needs.setdefault(module, set()).update(names & set(FIRST))
        heavy[module] = heavy.get(module, 0) + bool(names & set(HEAVY))
    groups = {module: group_of(module, found) for module, found in needs.items()}
    weights: dict[str, int] = {}
    for module, group in groups.items():  # dicts keep the collection order: ties stay in it
        weights[group] = weights.get(group, 0) + heavy[module]
    place = group_order(weights)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid.split("::", 1)[0]]))
    items.sort(key=lambda item: place[groups[item.nodeid.split("::", 1)[0]]])
