"""Find a stored run from what a user types: its run id, its display name, its stored path, or (through a
callback) a published run's file."""
from __future__ import annotations

from typing import Callable

from lab.errors import LabError
from lab.store.db import Store

SHOWN_MATCHES = 5


def _one(rows: list[tuple], ref: str) -> str | None:
    ids = sorted({str(r[0]) for r in rows})
    if len(ids) == 1:
        return ids[0]
    if len(ids) > 1:
        shown = "; ".join(f"{name} [{rid}]" for rid, name in sorted({(str(r[0]), str(r[1])) for r in rows})[:SHOWN_MATCHES])
        raise LabError(f"'{ref}' names {len(ids)} runs ({shown}{'; …' if len(ids) > SHOWN_MATCHES else ''}); "
                       "give the run id")
    return None


def find_run(store: Store, ref: str, published_path: Callable[[], str | None] | None = None) -> str:
    """The run id `ref` names: a run id, an exact display name, a stored path (or its end, with or without
    `.json`), a display name in any case or the run's short name, then the stored path of a published run
    (`published_path`); LabError saying what to give."""
    ref = (ref or "").strip()
    if not ref:
        raise LabError("no run given: name a result file, a run id or name in the store, or a published run")
    queries = (
        "SELECT run_id, display_name FROM runs WHERE run_id = ?",
        "SELECT run_id, display_name FROM runs WHERE display_name = ?",
        "SELECT run_id, display_name FROM runs WHERE path = ? OR suffix(path, '/' || ?)",
        "SELECT run_id, display_name FROM runs WHERE path = ? || '.json' OR suffix(path, '/' || ? || '.json')",
        "SELECT run_id, display_name FROM runs WHERE lower(display_name) = lower(?) OR model_short = ?",
    )
    for sql in queries:
        found = _one(store.rows(sql, [ref] * sql.count("?")), ref)
        if found:
            return found
    stored = published_path() if published_path is not None else None
    if stored:
        found = _one(store.rows("SELECT run_id, display_name FROM runs WHERE path = ?", [stored]), ref)
        if found:
            return found
        raise LabError(f"published run '{ref}' is fetched ({stored}) but not in the store; import it with "
                       f"`python -m lab results import <results>/{stored}`")
    shown = ref if len(ref) <= 120 else f"{ref[:120]}…"
    raise LabError(f"'{shown}' names no run of the store (a run id, display name or result file name) nor a published "
                   "run; list the store's runs with "
                   "`python -m lab results sql \"SELECT run_id, display_name FROM runs\"` and the published ones with "
                   "`python -m lab data published list`")
