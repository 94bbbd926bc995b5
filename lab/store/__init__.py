"""The lab's DuckDB store: schema, import of result files and leaderboard CSVs, named queries, plots."""
from lab.store.db import Store, register_schema, schema_version
from lab.store.importer import ImportReport, import_file, import_leaderboards, import_path, rebuild, run_id_of
from lab.store.opening import open_store
from lab.store.queries import load_queries, run_query

__all__ = [
    "ImportReport", "Store", "import_file", "import_leaderboards", "import_path", "load_queries", "open_store",
    "rebuild", "register_schema", "run_id_of", "run_query", "schema_version",
]
