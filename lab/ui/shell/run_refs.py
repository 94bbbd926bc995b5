"""Runs as links name them: a stored run by its display name where that names only it, else by its id; and a
name from a link back to the run (LabError when the store has none)."""
from __future__ import annotations

import threading
from collections import OrderedDict

from lab.errors import LabError
from lab.store.run_lookup import find_run
from lab.workspace import LabContext

_names: OrderedDict = OrderedDict()  # (store file, generation, run id) -> what a link calls the run
_lock = threading.Lock()
MAX_KEPT = 1024


def run_ref(ctx: LabContext, run_id: str) -> str:
    """What a link calls the stored run `run_id`: its display name where that names only it (and holds no comma,
    which separates a link's columns), else its id."""
    if ctx.store is None:
        return run_id
    key = (str(ctx.store.path), ctx.store.connector.generation(), run_id)
    with _lock:
        if key in _names:
            return _names[key]
    with ctx._store_lock:
        rows = ctx.store.rows("SELECT display_name FROM runs WHERE run_id = ?", [run_id])
        name = str(rows[0][0]) if rows else run_id
        try:
            ref = name if "," not in name and find_run(ctx.store, name) == run_id else run_id
        except LabError:
            ref = run_id
    with _lock:
        _names[key] = ref
        while len(_names) > MAX_KEPT:
            _names.popitem(last=False)
    return ref


def run_of(ctx: LabContext, ref: str) -> str:
    """The run id a link's name (id, display name, file name) stands for (LabError: none, or several)."""
    if ctx.store is None:
        raise LabError(ctx.store_error or "the results database is not open")
    with ctx._store_lock:
        return find_run(ctx.store, ref)
