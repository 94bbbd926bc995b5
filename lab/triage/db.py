"""Triage's access to the lab's DuckDB store: its own DDL plus thin parameterized-query helpers."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import duckdb
import pandas as pd

from lab.store.db import Store

SCHEMA_PATH = Path(__file__).with_name("schema.sql")


def query_df(store: Store, sql: str, params: Sequence[Any] | None = None) -> pd.DataFrame:
    """Run a parameterized SELECT and return a DataFrame."""
    return store.query(sql, list(params or []))


def query_rows(store: Store, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
    """Run a parameterized SELECT and return its rows as tuples."""
    return store.rows(sql, list(params or []))


def query_dicts(store: Store, sql: str, params: Sequence[Any] | None = None) -> list[dict]:
    """Run a parameterized SELECT and return its rows as dicts (plain Python values, NULL as None)."""
    return store.dicts(sql, list(params or []))


@contextmanager
def write_transaction(store: Store, kind: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor inside the store's BEGIN … COMMIT (writes are serialized by the store); `kind` names what a
    visitor's click writes (annotations, slices: lab.security.visitor_writes), None the lab's own data."""
    if kind is None:
        with store.transaction() as cur:
            yield cur
        return
    with store.writes(kind), store.transaction() as cur:
        yield cur


def ensure_triage_schema(store: Store) -> None:
    """Create the triage tables (idempotent); the store re-applies the file on every later open."""
    store.ensure_schema(SCHEMA_PATH)
