"""One line for a failed `results sql` query: DuckDB's own first line, then the columns of the
tables the query names (or the tables there are) and where to look further."""
from __future__ import annotations

import duckdb

from lab.store.db import Store

TABLES_HINT = "`python -m lab results tables` lists the tables; `results sql \"DESCRIBE runs\"` shows a table's columns"


def table_columns(store: Store) -> dict[str, list[str]]:
    """Every table and view of the main schema with its columns, in order."""
    rows = store.rows("SELECT table_name, column_name FROM information_schema.columns "
                      "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position")
    out: dict[str, list[str]] = {}
    for table, column in rows:
        out.setdefault(str(table), []).append(str(column))
    return out


def named_tables(query: str) -> list[str]:
    """The tables a query reads, as DuckDB's parser finds them (none when it does not parse)."""
    try:
        return sorted(duckdb.get_table_names(query))
    except duckdb.Error:
        return []


def sql_error_text(store: Store, query: str, exc: Exception) -> str:
    """`SQL error: <DuckDB's first line>; <the named tables' columns or the known tables>; <hint>`."""
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
    try:
        known = table_columns(store)
    except duckdb.Error:
        known = {}
    parts = [f"SQL error: {first}"]
    named = [t for t in named_tables(query) if t in known]
    if named and isinstance(exc, duckdb.BinderException):
        parts += [f"{t} has columns {', '.join(known[t])}" for t in named]
    elif known:
        parts.append(f"tables: {', '.join(known)}")
    parts.append(TABLES_HINT)
    return "; ".join(parts)
