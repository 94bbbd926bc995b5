"""Display names unique per run: runs that would share a name get ' [their file name]' appended."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePosixPath

from lab.store.db import Store

SUFFIX_RX = re.compile(r" \[[^\[\]]*\]$")


def base_name(name: str) -> str:
    """The display name without the suffix `unique_display_names` may have added."""
    return SUFFIX_RX.sub("", name)


def _suffixes(paths: list[str], run_ids: list[str]) -> list[str]:
    """The shortest tail of each path that tells the runs apart (file stem, then folder/stem), else run ids."""
    stems = [PurePosixPath(p).with_suffix("").as_posix() for p in paths]
    for depth in (1, 2, 3):
        tails = ["/".join(s.split("/")[-depth:]) for s in stems]
        if len(set(tails)) == len(tails):
            return tails
    return run_ids


def unique_display_names(store: Store) -> int:
    """Rename runs sharing a display name to '<name> [<file>]' (and undo it once a name is unique
    again); only changed rows are written. Returns how many were renamed."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in store.dicts("SELECT run_id, display_name, path FROM runs ORDER BY path"):
        groups[base_name(row["display_name"])].append(row)
    changes = []
    for base, rows in groups.items():
        if len(rows) == 1:
            wanted = [base]
        else:
            wanted = [f"{base} [{s}]" for s in _suffixes([r["path"] for r in rows], [r["run_id"] for r in rows])]
        changes += [(w, r["run_id"]) for w, r in zip(wanted, rows) if w != r["display_name"]]
    if changes:
        with store.transaction() as cur:
            cur.executemany("UPDATE runs SET display_name = ? WHERE run_id = ?", changes)
    return len(changes)
