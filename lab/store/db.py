"""The lab's DuckDB file: open (create / rebuild when missing or outdated), query, transactions."""
from __future__ import annotations

import re
import threading
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import duckdb
import pandas as pd

from lab.errors import LabError
from lab.security.visitor_writes import refusal
from lab.store.connection import Connector, ReadCache

SCHEMA_PATH = Path(__file__).with_name("schema.sql")
_VERSION_RX = re.compile(r"^--\s*schema_version:\s*(\d+)\s*$", re.MULTILINE)
_PARAM_RX = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")

# Extra DDL files other modules plug in (e.g. lab/triage/schema.sql); applied on every open.
_EXTRA_DDL: list[Path] = []


def register_schema(ddl_path: str | Path) -> None:
    """Register an extra DDL file (idempotent `CREATE … IF NOT EXISTS`) applied on every open."""
    p = Path(ddl_path).resolve()
    if p not in _EXTRA_DDL:
        _EXTRA_DDL.append(p)


def schema_version(path: Path | None = None) -> int:
    """The version declared in schema.sql (`-- schema_version: N`)."""
    path = path or SCHEMA_PATH
    m = _VERSION_RX.search(path.read_text(encoding="utf-8"))
    if not m:
        raise LabError(f"{path}: no '-- schema_version: N' line")
    return int(m.group(1))


# Core objects, dropped on rebuild (tables other modules add, e.g. annotations, are kept).
CORE_TABLES = ("leaderboard", "tblite", "legacy_leaderboard", "leaderboard_groups", "runs", "steps", "schema_version",
               "samples", "sample_stats", "reference_runs", "reference_steps")
CORE_VIEWS = ("results_all", "step_reference")


def bind_params(sql: str, params: Mapping[str, Any] | Sequence[Any] | None) -> Mapping[str, Any] | Sequence[Any] | None:
    """Keep only the named `$params` the SQL uses (DuckDB rejects extras); complain about missing ones."""
    if params is None or not isinstance(params, Mapping):
        return params
    used = set(_PARAM_RX.findall(_strip_sql_literals(sql)))
    missing = used - set(params)
    if missing:
        raise LabError(f"query parameter(s) missing: {', '.join(sorted(missing))}")
    return {k: v for k, v in params.items() if k in used}


def _strip_sql_literals(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'|--[^\n]*", "", sql)


class Store:
    """The results database, shared by threads and processes (see lab.store.connection).

    The file is opened per operation (kept open briefly across bursts) and never held for the
    app's whole life, so `python -m lab results …`, a CLI replay and a second app can use it at
    the same time. Reads are cached until any process changes the file; writes take a lock."""

    def __init__(self, connector: Connector, path: Path, results_dir: Path | None = None):
        self.connector = connector
        self.path = path
        self.results_dir = results_dir
        self._write_lock = threading.RLock()
        self._ensured: set[Path] = set()
        # (file, reason) of every result file under results/ the last open could not import
        self.import_problems: list[tuple[str, str]] = []
        self.cache = ReadCache()
        # set (to the reason) while the store serves visitors: a write goes through only when it is of a kind the
        # owner opened to them (`visitor_kinds`, marked with `writes(kind)`: lab.security.visitor_writes)
        self.refuse_writes: str | None = None
        self.visitor_kinds: frozenset[str] = frozenset()
        self._derived = threading.local()
        self.equiv_contexts: dict = {}  # step key -> EquivContext (cwd) for equiv_f1, set by open_store
        # equiv_f1 columns: filled right after each import, or (defer_equiv) left pending for a
        # background filler (lab.store.equiv_filler; anything with `kick()`) the app attaches here
        self.defer_equiv = False
        self.equiv_filler: Any = None

    def _check_writable(self) -> None:
        if not self.refuse_writes or getattr(self._derived, "on", False):
            return
        kind = getattr(self._derived, "kind", None)
        if kind is None:
            raise LabError(self.refuse_writes)
        if kind not in self.visitor_kinds:
            raise LabError(refusal(kind))

    @contextmanager
    def _in_thread(self, name: str, value: object) -> Iterator["Store"]:
        """Set this thread's `name` (of the write marks) to `value` for the block."""
        before = getattr(self._derived, name, None)
        setattr(self._derived, name, value)
        try:
            yield self
        finally:
            setattr(self._derived, name, before)

    def writes(self, kind: str) -> AbstractContextManager["Store"]:
        """Mark this thread's writes in the block as `kind` (annotations, slices, series, whatif: the kinds of
        lab.security.visitor_writes): while the store serves visitors they go through only if that kind is open."""
        return self._in_thread("kind", kind)

    def derived_writes(self) -> AbstractContextManager["Store"]:
        """Allow, in this thread, writes of data the lab derives from stored runs (e.g. triage's
        step flags) even where `refuse_writes` blocks what visitors write."""
        return self._in_thread("on", True)

    # -- reading -----------------------------------------------------------------------------
    def _read(self, kind: str, sql: str, params, fetch):
        def run():
            with self.connector.cursor() as cur:
                return fetch(cur.execute(sql, bind_params(sql, params)))

        return self.cache.get_or_run(kind, sql, params, self.connector.generation(), run)

    def query(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> pd.DataFrame:
        """Run a parameterized query and return a DataFrame (`$name` params from a dict, or `?` from a list)."""
        return self._read("df", sql, params, lambda cur: cur.df()).copy()

    def scalar(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> Any:
        row = self._read("one", sql, params, lambda cur: cur.fetchone())
        return None if row is None else row[0]

    def rows(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> list[tuple]:
        """Run a parameterized query and return its rows as tuples."""
        return list(self._read("rows", sql, params, lambda cur: cur.fetchall()))

    def dicts(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> list[dict]:
        """Run a parameterized query and return its rows as dicts (NULL as None)."""

        def fetch(cur):
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]

        return [dict(d) for d in self._read("dicts", sql, params, fetch)]

    @contextmanager
    def hold(self) -> Iterator["Store"]:
        """Keep the file open for a block of operations (other processes wait until it ends)."""
        with self.connector.hold():
            yield self

    def tables(self) -> pd.DataFrame:
        """Tables and views of the main schema with their row counts."""
        names = self.query(
            "SELECT table_name AS name, table_type AS type FROM information_schema.tables "
            "WHERE table_schema = 'main' ORDER BY table_name"
        )
        counts = []
        for name in names["name"]:
            counts.append(self.scalar(f"SELECT count(*) FROM {quote_ident(name)}"))
        names["rows"] = counts
        return names

    # -- writing -----------------------------------------------------------------------------
    def execute(self, sql: str, params: Mapping[str, Any] | Sequence[Any] | None = None) -> None:
        """Run one parameterized statement (serialized with other writes)."""
        self._check_writable()
        with self._write_lock, self.connector.cursor() as cur:
            cur.execute(sql, bind_params(sql, params))
        self.connector.wrote()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor inside BEGIN … COMMIT; any exception rolls everything back."""
        self._check_writable()
        with self._write_lock, self.connector.cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
        self.connector.wrote()

    def ensure_schema(self, extra_ddl_path: str | Path) -> None:
        """Apply an extra DDL file now and on every later open (must be idempotent)."""
        register_schema(extra_ddl_path)
        path = Path(extra_ddl_path).resolve()
        if path in self._ensured:  # applied on this connection already (callers ask on every query)
            return
        self._run_ddl(path)
        self._ensured.add(path)

    def _run_ddl(self, path: Path) -> None:
        with self._write_lock, self.connector.cursor() as cur:
            cur.execute(path.read_text(encoding="utf-8"))
        self.connector.wrote()

    # -- schema ------------------------------------------------------------------------------
    def stored_version(self) -> int | None:
        exists = self.scalar(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema='main' AND table_name='schema_version'"
        )
        if not exists:
            return None
        return self.scalar("SELECT max(version) FROM schema_version")

    def create_core_schema(self) -> None:
        """Drop the core tables (keeping others' tables) and create them afresh from schema.sql."""
        with self.transaction() as cur:
            for view in CORE_VIEWS:
                cur.execute(f"DROP VIEW IF EXISTS {quote_ident(view)}")
            for table in CORE_TABLES:
                cur.execute(f"DROP TABLE IF EXISTS {quote_ident(table)}")
            cur.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
            cur.execute(
                "INSERT INTO schema_version VALUES (?, ?)",
                [schema_version(), datetime.now(timezone.utc).replace(tzinfo=None)],
            )
        self.run_registered_ddl()

    def run_registered_ddl(self) -> None:
        """Run every extra schema file registered so far (triage, published links, …); idempotent DDL."""
        for extra in _EXTRA_DDL:
            self._run_ddl(extra)

    def close(self) -> None:
        """Release the file now (it is reopened by the next operation)."""
        self.connector.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def quote_ident(name: str) -> str:
    """Quote an identifier that comes from the catalogue or a whitelist (never from user input)."""
    return '"' + name.replace('"', '""') + '"'
