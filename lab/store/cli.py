"""`python -m lab results …`: query and import the lab's DuckDB store."""
from __future__ import annotations

import argparse
import sys

import duckdb

from lab.errors import LabError
from lab.settings import Settings
from lab.store.db import Store
from lab.store.opening import open_store
from lab.store.sql_hint import TABLES_HINT, sql_error_text
from lab.store.importer import ImportReport, rebuild
from lab.store.series_cli import ShowSeries, add_series_arguments, run_series
from lab.store.dataset.cli import ExportRuns, PublishedPath, add_export_arguments, import_paths, run_export


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="DuckDB file (default: <results>/lab.duckdb or $LAB_DB)")
    parser.add_argument("--results", default=None, help="results folder the store is built from (default: results/)")
    sub = parser.add_subparsers(dest="results_command", required=True)
    p = sub.add_parser("sql", help="run a SQL query and print the answer as CSV",
                       description="Run a SQL query on the lab's DuckDB store and print the answer as CSV. "
                                   f"Schema: {TABLES_HINT}.")
    p.add_argument("query", help='e.g. "SELECT count(*) FROM leaderboard WHERE in_first_56"')
    p = sub.add_parser("import", help="import result JSON files, folders of them (recursively) or datasets of runs")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="a TB2-lite result JSON file (legacy or corrected), a folder searched recursively for "
                        "them, a dataset folder (`results export`), or hf://datasets/OWNER/NAME[@REVISION]; "
                        "already imported files are left unchanged")
    p.add_argument("--replay", default=None, metavar="JSONL",
                   help="the replay file whose step screens give equiv_f1 its working directories (default: "
                        "$LAB_REPLAY, else the cached download); runs filled without it are filled again")
    add_export_arguments(sub)
    sub.add_parser("rebuild", help="recreate the store from the results folder")
    sub.add_parser("tables", help="list tables and views with their row counts (what `sql` can read)")
    add_series_arguments(sub)


def _store(args: argparse.Namespace, *, sync: bool = True, fill_left_pending: bool = True) -> Store:
    kwargs = {}
    if args.results:
        kwargs["results_dir"] = args.results
    if args.db:
        kwargs["db_path"] = args.db
    if getattr(args, "replay", None):
        kwargs["replay_path"] = args.replay
    store = open_store(Settings(**kwargs), sync=sync, fill_left_pending=fill_left_pending)
    for name, why in store.import_problems:  # broken files under results/ are never skipped silently
        print(f"warning: not imported: {why if why.startswith(name) else f'{name}: {why}'}", file=sys.stderr)
    return store


def _print_report(report: ImportReport) -> int:
    print(report.summary())
    return 0 if report.ok else 1


def run(args: argparse.Namespace, published_path: PublishedPath | None = None, export_runs: ExportRuns | None = None,
        show_series: ShowSeries | None = None) -> int:
    """What rooms above the store do for it, passed in by lab.cli: `published_path(ref, settings)`, a published
    run's stored path, and `export_runs`, the dataset export with its intervals (for `export`); `show_series`, a
    series' judgement (for `series show`)."""
    cmd = args.results_command
    if cmd == "rebuild":
        with _store(args, sync=False) as store, store.hold():
            return _print_report(rebuild(store))
    # a query (sql, tables) never waits for equiv fills of runs it did not import itself
    with _store(args, sync=cmd != "import", fill_left_pending=cmd == "import") as store:
        if cmd == "sql":
            try:
                df = store.query(args.query)
            except duckdb.Error as exc:
                raise LabError(sql_error_text(store, args.query, exc)) from None
            df.to_csv(sys.stdout, index=False)
            return 0
        if cmd == "import":
            return _print_report(import_paths(store, args.paths))
        if cmd == "export":
            if export_runs is None:
                raise LabError("`results export` needs the analysis, which `python -m lab` passes in")
            return run_export(store, args, export_runs, published_path)
        if cmd == "series":
            return run_series(store, args, show_series)
        store.tables().to_csv(sys.stdout, index=False)
        return 0
