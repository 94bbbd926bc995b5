"""Runs as links name them: a stored run by its display name where that names only it, else by its id; and a
name from a link back to the run (LabError when the store has none)."""
from __future__ import annotations

from lab.errors import LabError
from lab.store.run_lookup import find_run
from lab.workspace import LabContext, LRUCache

MAX_KEPT = 1024
# (store file, generation, run id) -> what a link calls the run: cachetools' LRU map behind a lock
_names: LRUCache[tuple[str, tuple, str], str] = LRUCache(MAX_KEPT)


def run_ref(ctx: LabContext, run_id: str) -> str:
    """What a link calls the stored run `run_id`: its display name where that names only it (and holds no comma,
    which separates a link's columns), else its id."""
    if ctx.store is None:
        return run_id
    key = (str(ctx.store.path), ctx.store.connector.generation(), run_id)
    kept = _names.get(key)
    if kept is not None:
        return kept
    with ctx.store_session() as store:
        rows = store.rows("SELECT display_name FROM runs WHERE run_id = ?", [run_id])
        name = str(rows[0][0]) if rows else run_id
        try:
            ref = name if "," not in name and find_run(store, name) == run_id else run_id
        except LabError:
            ref = run_id
    _names.put(key, ref)
    return ref


def run_of(ctx: LabContext, ref: str) -> str:
    """The run id a link's name (id, display name, file name) stands for (LabError: none, or several)."""
    with ctx.store_session() as store:  # LabError saying why when the store is not open
        return find_run(store, ref)
