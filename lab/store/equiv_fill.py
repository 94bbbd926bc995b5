"""Fill the equiv_f1 columns of runs imported with them pending (runs.equiv_state = 'pending').

The importer writes a run with its harness columns only; this computes the equiv columns from the
stored units (lab.store.equiv_columns, the same computation the import did before) and writes
them with the run's `equiv_state` = 'done' (or 'skipped' when a step was past the equiv limits)
in one transaction, so a process killed mid-fill leaves the run pending, never half filled. The
file is not held while the columns are computed; the write checks the run is still pending, so
a run is written once even when two processes compute it.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import duckdb

import pandas as pd

from lab.errors import LabError
from lab.scoring.equiv import NEEDS_REPLAY as NEEDS_REPLAY_TEXT
from lab.store.db import Store
from lab.store.equiv_columns import EQUIV_STEP_SCHEMA, run_equiv_fields, with_equiv_columns
from lab.tb2lite import CORRECTED, LEGACY

PENDING, DONE, SKIPPED, NEEDS_REPLAY, FAILED = "pending", "done", "skipped", "needs_replay", "failed"
FILLED = (DONE, SKIPPED, NEEDS_REPLAY)  # states whose columns were computed with some replay's contexts
_INPUT_COLUMNS = ("step_key", "pred_command_units", "ref_command_units", "first_cmd_exact", "command_precision",
                  "command_recall", "command_f1")
_RUN_FIELDS = ("avg_equiv_f1", "equiv_score", "spelling_gap")
_FILL_LOCK = threading.Lock()  # one fill at a time in this process (the equiv caches are shared)
_later = threading.local()  # run ids whose fill waits for the end of a `fills_after` block
log = logging.getLogger(__name__)


def _scorer(scoring_version: str | None) -> str:
    return LEGACY if scoring_version == "legacy_386" else CORRECTED


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
    meanwhile by another process or thread, or gone). A run whose rules fail is marked 'failed'.

    The file is held only to read the run's units and, later, to write its columns in one
    transaction that first checks the run is still pending: the computation between (bounded per
    step by the equiv limits) holds nothing, so other processes query the store meanwhile."""
    with _FILL_LOCK:
        with store.connector.cursor() as cur:
            if _state(cur, run_id) != PENDING:
                return False
            [(score, version)] = cur.execute("SELECT score, scoring_version FROM runs WHERE run_id = ?",
                                             [run_id]).fetchall()
            steps = cur.sql(f"SELECT {', '.join(_INPUT_COLUMNS)} FROM steps WHERE run_id = ? ORDER BY ord",
                            params=[run_id]).to_arrow_table()
        try:
            filled = with_equiv_columns(steps, store.equiv_contexts, _scorer(version))
            fields = run_equiv_fields(filled, score)
            state = _filled_state(filled.column("equiv_skipped").to_pylist())
        except Exception as exc:  # noqa: BLE001 - a rule failing on odd input: say so, never retry forever
            log.warning("equiv_f1 of run %s could not be computed: %s: %s", run_id, type(exc).__name__, exc)
            filled, fields, state = None, dict.fromkeys(_RUN_FIELDS), FAILED
        with store.derived_writes(), store.transaction() as tx:
            if _state(tx, run_id) != PENDING:
                return False
            if filled is not None:
                _write_steps(tx, run_id, filled)
            tx.execute("UPDATE runs SET avg_equiv_f1 = ?, equiv_score = ?, spelling_gap = ?, equiv_state = ? "
                       "WHERE run_id = ?", [*(fields[k] for k in _RUN_FIELDS), state, run_id])
    return True


def _filled_state(reasons: list[str | None]) -> str:
    """needs_replay when a step needs the replay's screen, skipped when one is too large, else done."""
    if NEEDS_REPLAY_TEXT in reasons:
        return NEEDS_REPLAY
    return SKIPPED if any(reasons) else DONE


def stale_run_ids(store: Store, among: Sequence[str] | None = None) -> list[str]:
    """Filled runs (of `among`, when given) with a step whose stored working directory is not the one the
    store's replay (`store.equiv_contexts`) gives it: filled without the replay, or with another one."""
    if not store.equiv_contexts or (among is not None and not among):
        return []
    frame = pd.DataFrame({"step_key": list(store.equiv_contexts),
                          "cwd": [c.cwd for c in store.equiv_contexts.values()]})
    with store.connector.cursor() as cur:
        cur.register("equiv_ctx", frame)
        try:
            rows = cur.execute(
                "SELECT DISTINCT s.run_id FROM steps s JOIN runs r ON r.run_id = s.run_id "
                "LEFT JOIN equiv_ctx c ON c.step_key = s.step_key "
                f"WHERE r.equiv_state IN ({', '.join('?' for _ in FILLED)}) AND s.equiv_cwd IS DISTINCT FROM c.cwd"
                + (" AND list_contains(?, s.run_id)" if among is not None else ""),
                [*FILLED, *([list(among)] if among is not None else [])]).fetchall()
        finally:
            cur.unregister("equiv_ctx")
    return sorted(r[0] for r in rows)


def refill_stale(store: Store, among: Sequence[str] | None = None) -> int:
    """Set every stale run (stale_run_ids; of `among`, when given) pending again, its equiv columns emptied,
    so the fill computes them with the replay now known (never two values: Compare uses that replay too).
    How many runs; the caller fills them (or kicks the background filler)."""
    ids = stale_run_ids(store, among)
    if not ids:
        return 0
    marks = ", ".join("?" for _ in ids)
    with store.derived_writes(), store.transaction() as tx:
        tx.execute(f"UPDATE steps SET equiv_precision = NULL, equiv_recall = NULL, equiv_f1 = NULL, equiv_cwd = NULL, "
                   f"equiv_skipped = NULL WHERE run_id IN ({marks})", ids)
        tx.execute(f"UPDATE runs SET avg_equiv_f1 = NULL, equiv_score = NULL, spelling_gap = NULL, equiv_state = ? "
                   f"WHERE run_id IN ({marks}) AND equiv_state IN ({', '.join('?' for _ in FILLED)})",
                   [PENDING, *ids, *FILLED])
    return len(ids)


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


@contextmanager
def fills_after(store: Store) -> Iterator[None]:
    """Imports inside the block leave their equiv columns pending; they are filled when the block
    ends without an error (so an import that holds the file fills after letting it go). Nested
    blocks fill when the outermost ends."""
    if getattr(_later, "ids", None) is not None:
        yield
        return
    _later.ids = []
    try:
        yield
        ids = _later.ids
    finally:
        _later.ids = None
    for run_id in ids:
        after_import(store, run_id)


def after_import(store: Store, run_id: str) -> None:
    """Right after a run's import: fill its equiv columns now (or when the enclosing `fills_after`
    block ends), or leave them to the store's background filler (`store.defer_equiv`), waking it
    when one is attached. A store problem while filling leaves the run pending (the next opening of
    the store fills it)."""
    later = getattr(_later, "ids", None)
    if later is not None:
        later.append(run_id)
        return
    if not store.defer_equiv:
        try:
            fill_run(store, run_id)
        except (LabError, duckdb.Error) as exc:
            log.warning("equiv_f1 of run %s left pending: %s", run_id, exc)
    elif store.equiv_filler is not None:
        store.equiv_filler.kick()
