"""Read one config's Parquet files as the dataset's columns, checked and bounded (a hostile file is refused
in one line before it costs more than its limits): size, rows, decompressed size, each column's type."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lab.errors import LabError
from lab.jsontext import JsonTextError, loads, one_line
from lab.store.dataset.layout import META_KEY, limits, run_schema


def _open(path: Path, name: str) -> pq.ParquetFile:
    size = path.stat().st_size
    if size > limits()["max_file_bytes"]:
        raise LabError(f"{name}: {size:,} bytes, more than one data file may hold ({limits()['max_file_bytes']:,})")
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise LabError(f"{name}: not a readable Parquet file ({one_line(exc, 160)})") from None


def _check_size(pf: pq.ParquetFile, name: str) -> None:
    meta = pf.metadata
    if meta.num_rows > limits()["max_rows"]:
        raise LabError(f"{name}: {meta.num_rows:,} rows, more than one run's steps may be ({limits()['max_rows']:,})")
    raw = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if raw > limits()["max_uncompressed_bytes"]:
        raise LabError(f"{name}: {raw:,} bytes once decompressed, more than an import reads "
                       f"({limits()['max_uncompressed_bytes']:,})")


def _cast(table: pa.Table, name: str) -> pa.Table:
    """The table in the dataset's schema: known columns cast to their type (a column that cannot be is
    refused, naming it), missing ones null, unknown ones dropped."""
    schema = run_schema()
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        try:
            columns.append(column.cast(field.type, safe=True))
        except (pa.ArrowException, ValueError) as exc:
            raise LabError(f"{name}: column '{field.name}' is {column.type}, not {field.type} "
                           f"({one_line(exc, 100)})") from None
    return pa.Table.from_arrays(columns, schema=schema)


def run_metadata(pf: pq.ParquetFile, name: str) -> dict[str, Any]:
    """The run's settings an export keeps in the file's metadata ({} when the file has none)."""
    raw = (pf.schema_arrow.metadata or {}).get(META_KEY)
    if raw is None:
        return {}
    if len(raw) > limits()["max_metadata_bytes"]:
        raise LabError(f"{name}: its run settings take {len(raw):,} bytes, more than an import reads")
    return json_object(raw, name, "its run settings")


def read_config(files: list[Path], name: str) -> tuple[pa.Table, dict[str, Any]]:
    """The rows of one config (its files in order) and the run settings of its first file."""
    tables, meta, rows = [], {}, 0
    for i, path in enumerate(files):
        where = f"{name} ({path.name})"
        pf = _open(path, where)
        _check_size(pf, where)
        rows += pf.metadata.num_rows
        if rows > limits()["max_rows"]:
            raise LabError(f"{name}: more than {limits()['max_rows']:,} rows in all")
        if i == 0:
            meta = run_metadata(pf, where)
        wanted = [f.name for f in run_schema() if f.name in pf.schema_arrow.names]
        try:
            table = pf.read(columns=wanted, use_pandas_metadata=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise LabError(f"{where}: cannot read its rows ({one_line(exc, 160)})") from None
        tables.append(_cast(table, where))
    return pa.concat_tables(tables), meta


def json_object(text: Any, where: str, what: str = "extra_json") -> dict[str, Any]:
    """JSON text that must be an object (a row's `extra_json`, the run's settings) read back ({} for none);
    LabError naming `where` and `what` for anything else."""
    if text is None or text == "" or text == b"":
        return {}
    try:
        value = loads(text)
    except JsonTextError as exc:
        raise LabError(f"{where}: {what}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise LabError(f"{where}: {what}: not a JSON object")
    return value

