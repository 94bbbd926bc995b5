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
