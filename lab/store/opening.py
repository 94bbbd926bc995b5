"""Open the DuckDB store: build it from the results folder when missing or outdated, else import what is new."""
from __future__ import annotations

from pathlib import Path

import duckdb

from lab.errors import LabError
from lab.settings import Settings
from lab.store import importer
from lab.store.connection import Connector
from lab.store.db import Store, schema_version
from lab.store.equiv_columns import replay_equiv_contexts
from lab.store.equiv_fill import fill_pending, fills_after, refill_stale


def _resolve(target: Settings | str | Path | None, results_dir: str | Path | None) -> tuple[Path, Path]:
    if isinstance(target, Settings):
        return Path(target.db_path), Path(results_dir or target.results_dir)
    settings = Settings() if results_dir is None else Settings(results_dir=Path(results_dir))
    db_path = Path(target) if target is not None else Path(settings.db_path)
    return db_path, Path(settings.results_dir)


def open_store(
    target: Settings | str | Path | None = None,
    results_dir: str | Path | None = None,
    *,
    sync: bool = True,
    defer_equiv: bool = False,
    fill_left_pending: bool = True,
) -> Store:
    """Open (or create) the DuckDB file.

    A missing file, or one whose schema_version is older than schema.sql's, is (re)built from
    `results_dir`: the leaderboard CSVs and every result JSON below it. With `sync`, result files
    added to `results_dir` since the last open are imported too (unchanged ones are skipped).
    Runs left with their equiv_f1 columns pending (by an import or a process killed mid-fill) are
    filled before this returns, unless `defer_equiv`: then the caller attaches a background filler
    (lab.store.equiv_filler) and imports into this store leave them pending too. With
    `fill_left_pending=False` (a read-only query) only the runs this opening imported are filled:
    the query never waits for runs another process is filling or left pending. Otherwise runs
    filled without the replay this store now knows (or with another) are set pending again first
    (lab.store.equiv_fill.refill_stale), so their equiv_f1 is the one Compare computes.
    """
    db_path, res_dir = _resolve(target, results_dir)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    store = Store(Connector(db_path), db_path, res_dir)
    store.defer_equiv = defer_equiv
    try:
        store.equiv_contexts = replay_equiv_contexts(target if isinstance(target, Settings) else Settings())
        with fills_after(store), store.hold():  # equiv filled after the file is let go
            version = store.stored_version()
            if version is None or version != schema_version():
                store.import_problems = importer.rebuild(store, res_dir).failed
            else:
                store.run_registered_ddl()
                if sync and res_dir.is_dir():
                    store.import_problems = importer.import_path(store, res_dir).failed
        if fill_left_pending:
            refill_stale(store)  # runs filled without this replay (or with another): computed again with it
            if not defer_equiv:
                fill_pending(store)
    except duckdb.Error as exc:
        store.close()
        raise LabError(f"cannot open the results database {db_path.name}: {exc}") from None
    except BaseException:
        store.close()
        raise
    return store
