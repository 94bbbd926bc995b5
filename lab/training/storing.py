"""The lab's store as an evaluation of a training run meets it: the run names it holds (so a new file never takes
a name a stored run has) and the import of each file as it is written (triage flags included), as
`python -m lab replay` does."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from lab.runs.claims import TakenFn
from lab.settings import Settings
from lab.training.evaluate import one_line
from lab.training.options import EvalOptions


def stored_names(options: EvalOptions, settings: Settings) -> TakenFn | None:
    """The store's check of run names (a run whose file is gone), when the files go into the store."""
    if not options.imports_into_store(settings):
        return None
    from lab.store.autoimport import store_run_names

    return store_run_names(settings)


def importer(options: EvalOptions, settings: Settings) -> Callable[[Path], str] | None:
    """Import a file into the lab's store (a line saying what happened), when the files go into the store."""
    if not options.imports_into_store(settings):
        return None
    from lab.store.autoimport import import_new_run
    from lab.triage import refresh_step_flags

    def import_file(path: Path) -> str:
        try:
            return import_new_run(settings, path, after_import=refresh_step_flags)
        except Exception as exc:  # noqa: BLE001 - the file is written; the lab imports it at its next start
            return f"warning: {path.name} not imported into the results database now ({one_line(exc)})"

    return import_file
