"""Short labels for long run names that stay distinct: presentation only (legends, axis ticks, bar
names). A name over the limit keeps its start and its end with '…' between; names that would
still look alike show where they differ (`…-lr1e-5…` / `…-lr2e-5…`); a name is shown whole
before two labels are ever the same text. Show the full name on hover beside every short label."""
from __future__ import annotations

import os
import re
from collections import defaultdict
from typing import Iterable

ELLIPSIS = "…"
LIMIT = 32  # characters a label may have when that keeps the labels apart
HEAD = 10  # characters of a name's start that a shortened label keeps
CONTEXT = 4  # characters shown either side of the place where alike names differ
END = 8  # characters of a long common ending kept after the differing part


def cut(name: str, limit: int = LIMIT) -> str:
    """`name` as its start, '…' and its end, `limit` characters long; unchanged when it fits."""
    if len(name) <= limit:
        return name
    tail = limit - HEAD - len(ELLIPSIS)
    return f"{name[:HEAD]}{ELLIPSIS}{name[len(name) - tail:]}"


def _apart(name: str, prefix: int, suffix: int) -> str:
    """`name` showing its start, the part from just before `prefix` to the common `suffix`, and the
    suffix's end: what tells it apart from names sharing that prefix and suffix."""
    start = max(prefix - CONTEXT, 0)
    suffix = max(suffix - CONTEXT, 0)
    end = len(name) - suffix
    head = name[:HEAD] + ELLIPSIS if start > HEAD + len(ELLIPSIS) else name[:start]
    tail = ELLIPSIS + name[len(name) - END:] if suffix > END + len(ELLIPSIS) else name[end:]
    label = head + name[start:end] + tail
    return label if len(label) < len(name) else name


SUFFIX_RX = re.compile(r"^(.+?)( \[[^\[\]]*\])$")  # "name [run id, partial 14/303]": kept whole


def short_labels(names: Iterable[object], limit: int = LIMIT) -> dict[str, str]:
    """Each distinct name -> its label: at most `limit` characters where that keeps every label
    distinct, longer only as far as needed to tell alike names apart; never the same text twice.
    A trailing ' […]' (run id, coverage) is kept as it is after the shortened name."""
    unique = list(dict.fromkeys(str(n) for n in names))
    parts = {n: (SUFFIX_RX.match(n).groups() if SUFFIX_RX.match(n) else (n, "")) for n in unique}
    if any(suffix for _, suffix in parts.values()):
        bases = _short(list(dict.fromkeys(base for base, _ in parts.values())), limit)
        labels = {n: bases[base] + suffix for n, (base, suffix) in parts.items()}
        if len(set(labels.values())) == len(labels):
            return labels
    return _short(unique, limit)


def _short(unique: list[str], limit: int) -> dict[str, str]:
    """`short_labels` of distinct names without a suffix rule."""
    labels = {n: cut(n, limit) for n in unique}
    for _ in range(3):
        groups: dict[str, list[str]] = defaultdict(list)
        for name, label in labels.items():
            groups[label].append(name)
        alike = [g for g in groups.values() if len(g) > 1]
        if not alike:
            return labels
        for group in alike:
            prefix = len(os.path.commonprefix(group))
            suffix = len(os.path.commonprefix([g[::-1] for g in group]))
            suffix = min(suffix, min(len(g) for g in group) - prefix)
            for name in group:
                labels[name] = _apart(name, prefix, suffix)
    counts = defaultdict(int)
    for label in labels.values():
        counts[label] += 1
    return {n: (n if counts[label] > 1 else label) for n, label in labels.items()}
