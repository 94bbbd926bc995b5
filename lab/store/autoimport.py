"""Import a freshly written result file into the shared results store (used by the CLI replay).

The store may be open in a running lab at the same time: the import waits for its turn on the
file (see lab.store.connection). When it cannot get it, the file is still saved under
results/ and the next start of the lab (or `python -m lab results import`) imports it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from lab.errors import LabError
from lab.settings import Settings
from lab.store.db import Store


def import_new_run(settings: Settings, path: str | Path,
                   after_import: Callable[[Store, list[str]], object] | None = None) -> str:
    """Import `path` into the store of `settings`, then call `after_import(store, [run_id])` (the CLI passes
    triage's flag refresh in); returns a one-line message (never raises LabError)."""
    from lab.store.importer import import_file, run_id_of
    from lab.store.opening import open_store

    try:
        store = open_store(settings, sync=False)
    except LabError as exc:
        return f"warning: not imported into the results database now ({exc}); the lab imports it at its next start"
    try:
        with store.hold():
            report = import_file(store, path)
            if report.failed:
                return f"warning: importing {Path(path).name} into the results database failed: {report.failed[0][1]}"
            run_id = run_id_of(Path(path).read_bytes())
            if after_import is not None:
                after_import(store, [run_id])
    finally:
        store.close()
    return f"imported into the results database as run {run_id}"


def stored_run_names(store: Store) -> Callable[[Path], str | None]:
    """A run-name check for lab.runs.claims: a result file path is taken when the store holds a run read from
    it (its file may be gone: the store's row is then the run's only copy, and a new file there would replace
    it on import). The paths are read once, now."""
    from lab.store.importer import stored_path

    rows = store.rows("SELECT path FROM runs UNION ALL SELECT path FROM reference_runs")
    held = {str(r[0]) for r in rows}
    results_dir = store.results_dir

    def taken(path: Path) -> str | None:
        return ("a run in the results database was read from it (its file is gone; the database holds the "
                "only copy)") if stored_path(Path(path), results_dir) in held else None

    return taken


def store_run_names(settings: Settings) -> Callable[[Path], str | None] | None:
    """stored_run_names of the store of `settings`, or None when it cannot be opened now."""
    from lab.store.opening import open_store

    try:
        store = open_store(settings, sync=False)
    except LabError:
        return None
    try:
        return stored_run_names(store)
    finally:
        store.close()
