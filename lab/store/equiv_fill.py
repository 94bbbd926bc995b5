"""Fill the equiv_f1 columns of runs imported with them pending (runs.equiv_state = 'pending').

The importer writes a run with its harness columns only; this computes the equiv columns from the
stored units (lab.store.equiv_columns, the same computation the import did before) and writes
them with the run's `equiv_state` = 'done' in one transaction, so a process killed mid-fill
leaves the run pending, never half filled. The file is held from the pending check to the
commit, so two processes (or threads) never fill one run twice.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import duckdb

from lab.errors import LabError
from lab.store.db import Store
from lab.store.equiv_columns import EQUIV_STEP_SCHEMA, run_equiv_fields, with_equiv_columns

PENDING, DONE, FAILED = "pending", "done", "failed"
_INPUT_COLUMNS = ("step_key", "pred_command_units", "ref_command_units", "first_cmd_exact", "command_precision",
                  "command_recall", "command_f1")
_RUN_FIELDS = ("avg_equiv_f1", "equiv_score", "spelling_gap")
_FILL_LOCK = threading.Lock()  # one fill at a time in this process (the equiv caches are shared)
log = logging.getLogger(__name__)


def _scorer(scoring_version: str | None) -> str:
    return "legacy" if scoring_version == "legacy_386" else "corrected"


def _state(cur: Any, run_id: str) -> str | None:
    rows = cur.execute("SELECT equiv_state FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return rows[0][0] if rows else None


def pending_run_ids(store: Store) -> list[str]:
    """Runs whose equiv columns are still to be filled, oldest import first (read afresh, not cached)."""
    with store.connector.cursor() as cur:
        rows = cur.execute("SELECT run_id FROM runs WHERE equiv_state = 'pending' ORDER BY imported_at, run_id")
        return [r[0] for r in rows.fetchall()]


def pending_count(store: Store) -> int:
    """How many runs wait for their equiv columns (for the UI's "equiv pending" notes)."""
    return int(store.scalar("SELECT count(*) FROM runs WHERE equiv_state = 'pending'") or 0)


def unfilled_states(store: Store) -> dict[str, str]:
    """run_id -> 'pending' or 'failed' for every run whose equiv columns are not filled."""
    return dict(store.rows("SELECT run_id, equiv_state FROM runs WHERE equiv_state <> 'done'"))


def fill_run(store: Store, run_id: str) -> bool:
    """Compute and store one pending run's equiv columns; False when it is not pending (filled
    meanwhile by another process or thread, or gone). A run whose rules fail is marked 'failed'."""
    with _FILL_LOCK, store.hold(), store.derived_writes(), store.connector.cursor() as cur:
        if _state(cur, run_id) != PENDING:
            return False
        [(score, version)] = cur.execute("SELECT score, scoring_version FROM runs WHERE run_id = ?",
                                         [run_id]).fetchall()
        steps = cur.sql(f"SELECT {', '.join(_INPUT_COLUMNS)} FROM steps WHERE run_id = ? ORDER BY ord",
                        params=[run_id]).to_arrow_table()
        try:
            filled = with_equiv_columns(steps, store.equiv_contexts, _scorer(version))
            fields, state = run_equiv_fields(filled, score), DONE
        except Exception as exc:  # noqa: BLE001 - a rule failing on odd input: say so, never retry forever
            log.warning("equiv_f1 of run %s could not be computed: %s: %s", run_id, type(exc).__name__, exc)
            filled, fields, state = None, dict.fromkeys(_RUN_FIELDS), FAILED
        with store.transaction() as tx:
            if _state(tx, run_id) != PENDING:
                return False
            if filled is not None:
                _write_steps(tx, run_id, filled)
            tx.execute("UPDATE runs SET avg_equiv_f1 = ?, equiv_score = ?, spelling_gap = ?, equiv_state = ? "
                       "WHERE run_id = ?", [*(fields[k] for k in _RUN_FIELDS), state, run_id])
    return True


def _write_steps(tx: Any, run_id: str, filled: Any) -> None:
    names = [f.name for f in EQUIV_STEP_SCHEMA]
    tx.register("equiv_new", filled.select(["step_key", *names]))
    try:
        tx.execute(f"UPDATE steps SET {', '.join(f'{n} = e.{n}' for n in names)} FROM equiv_new e "
                   "WHERE steps.run_id = ? AND steps.step_key = e.step_key", [run_id])
    finally:
        tx.unregister("equiv_new")


def fill_pending(store: Store, should_stop: Callable[[], bool] | None = None) -> int:
    """Fill every pending run (letting other processes in between runs); how many this call filled."""
    filled = 0
    for run_id in pending_run_ids(store):
        if should_stop is not None and should_stop():
            break
        filled += fill_run(store, run_id)
        store.connector.let_waiters_in()
    return filled


def after_import(store: Store, run_id: str) -> None:
    """Right after a run's import: fill its equiv columns now, or leave them to the store's
    background filler (`store.defer_equiv`), waking it when one is attached. A store problem
    while filling leaves the run pending (the next opening of the store fills it)."""
    if not store.defer_equiv:
        try:
            fill_run(store, run_id)
        except (LabError, duckdb.Error) as exc:
            log.warning("equiv_f1 of run %s left pending: %s", run_id, exc)
    elif store.equiv_filler is not None:
        store.equiv_filler.kick()
