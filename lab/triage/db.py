"""Triage's access to the lab's DuckDB store: its own DDL and parameterized queries."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import pandas as pd

SCHEMA_PATH = Path(__file__).with_name("schema.sql")
_CONNECTION_ATTRS = ("con", "conn", "connection", "_con", "_conn")


def connection(store: Any) -> duckdb.DuckDBPyConnection:
    """The DuckDB connection behind a Store (or a connection passed directly)."""
    if isinstance(store, duckdb.DuckDBPyConnection):
        return store
    for attr in _CONNECTION_ATTRS:
        con = getattr(store, attr, None)
        if isinstance(con, duckdb.DuckDBPyConnection):
            return con
    raise TypeError(f"{type(store).__name__} exposes no DuckDB connection ({', '.join(_CONNECTION_ATTRS)})")


def _cursor(store: Any) -> duckdb.DuckDBPyConnection:
    # A cursor per call: DuckDB connections must not be shared across Gradio's worker threads.
    return connection(store).cursor()


def query_df(store: Any, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
    """Run a parameterized SELECT and return a DataFrame."""
    cur = _cursor(store)
    try:
        return cur.execute(sql, list(params or [])).df()
    finally:
        cur.close()


def query_rows(store: Any, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
    """Run a parameterized SELECT and return its rows as tuples."""
    cur = _cursor(store)
    try:
        return cur.execute(sql, list(params or [])).fetchall()
    finally:
        cur.close()


def query_dicts(store: Any, sql: str, params: Sequence[Any] | None = None) -> list[dict]:
    """Run a parameterized SELECT and return its rows as dicts (plain Python values, NULL as None)."""
    cur = _cursor(store)
    try:
        cur.execute(sql, list(params or []))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        cur.close()


def execute(store: Any, sql: str, params: Sequence[Any] | None = None) -> None:
    """Run a parameterized statement (through the store's write lock when it has one)."""
    with write_transaction(store) as cur:
        cur.execute(sql, list(params or []))


@contextmanager
def write_transaction(store: Any) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor inside BEGIN … COMMIT: the store's own `transaction()` (it serializes writes) or ours."""
    hook = getattr(store, "transaction", None)
    if callable(hook):
        with hook() as cur:
            yield cur
        return
    cur = _cursor(store)
    try:
        cur.execute("BEGIN TRANSACTION")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")
    finally:
        cur.close()


def table_columns(store: Any, table: str) -> list[str]:
    """Column names of a table in the store ([] when it does not exist)."""
    rows = query_rows(
        store, "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [table]
    )
    return [r[0] for r in rows]


def ensure_triage_schema(store: Any) -> None:
    """Create the triage tables (idempotent).

    Uses the store's `ensure_schema(ddl_path)` hook (which also re-applies the file on every
    later open), else runs the DDL itself.
    """
    hook = getattr(store, "ensure_schema", None)
    if callable(hook):
        hook(SCHEMA_PATH)
        return
    cur = _cursor(store)
    try:
        cur.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
    finally:
        cur.close()
