"""`python -m lab data published list|fetch|catalogue`: the public per-step result files."""
from __future__ import annotations

import argparse
from pathlib import Path

from lab.errors import LabError
from lab.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="published_command", required=True)
    ls = sub.add_parser("list", help="the catalogue: runs, series, kind, fetched or not, size where known")
    ls.add_argument("--series", action="store_true", help="list the series only")
    fetch = sub.add_parser("fetch", help="download runs (cached, resumable, ≤4 at a time) and import them")
    pick = fetch.add_mutually_exclusive_group(required=True)
    pick.add_argument("--all", action="store_true", help="every run of the catalogue")
    pick.add_argument("--series", action="append", default=[], metavar="NAME",
                      help="the runs of a series (a name or part of one; repeatable)")
    pick.add_argument("--set", dest="owner_set", default=None, metavar="SPEC",
                      help="an owner's set as in LAB_PUBLISHED: 'all' or series/run names separated by ';'")
    pick.add_argument("paths", nargs="*", default=[], metavar="PATH", help="runs by key, repository path or file name")
    fetch.add_argument("--results", default=None, help="results folder whose DuckDB store gets the runs (default results/)")
    fetch.add_argument("--quiet", action="store_true", help="no progress bar")
    cat = sub.add_parser("catalogue", help="rebuild assets/published/catalogue.csv from a path/commit/kind listing")
    cat.add_argument("--from", dest="listing", required=True, help="published_results.tsv")
    cat.add_argument("--known", default=None, help="folder with exact copies of some files (their sha256 is recorded)")


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def run(args: argparse.Namespace) -> int:
    from lab.published import fetch as pub
    from lab.published.catalogue import (
        build_catalogue,
        load_catalogue,
        write_catalogue,
    )

    if args.published_command == "catalogue":
        rows = build_catalogue(Path(args.listing), Path(args.known) if args.known else None)
        print(f"wrote {write_catalogue(rows)} ({len(rows)} files)")
        return 0
    settings = Settings() if getattr(args, "results", None) is None else Settings(results_dir=Path(args.results))
    entries = load_catalogue()
    if args.published_command == "list":
        return _list(entries, settings, args.series)
    runs = (pub.select_set(args.owner_set, entries) if args.owner_set
            else pub.select_runs(args.all, args.series, args.paths, entries))
    if not runs:
        raise LabError("nothing to fetch: name runs, --series NAME or --all")
    from lab.store.opening import open_store

    with open_store(settings, sync=False) as store:
        report = pub.fetch_and_import(store, runs, settings.cache_dir, settings.results_dir, progress=not args.quiet)
    print(report.summary())
    return 0 if report.ok else 2  # like every refused input: exit code 2


def _list(entries, settings: Settings, only_series: bool) -> int:
    from lab.published.cache import Cache
    from lab.published.catalogue import runs_of, series_names
    from lab.published.fetch import run_file

    if only_series:
        for name, keys in series_names(entries).items():
            print(f"{name}  ({len(keys)} runs)")
        return 0
    cache = Cache(settings.cache_dir)
    runs = runs_of(entries)
    fetched = total = 0
    print(f"{'run':<100} {'kind':<7} {'size':>8}  {'state':<9} series")
    for run in sorted(runs.values(), key=lambda r: (r.series or "~", r.x or 0, r.key)):
        sizes = [cache.known(f).get("size") or f.size for f in run.files]
        size = None if None in sizes else sum(sizes)
        state = "imported" if run_file(settings.results_dir, run).is_file() else (
            "cached" if all(cache.file(f).is_file() for f in run.files) else "-")
        fetched += state != "-"
        total += size or 0
        pieces = f" ({len(run.pieces)} pieces)" if run.pieces else ""
        where = f"{run.series} @ {run.x_kind} {run.x}" if run.series else ""
        print(f"{run.key + pieces:<100} {run.kind:<7} {_size(size):>8}  {state:<9} {where}")
    print(f"{len(runs)} runs ({len(entries)} files; status files left out), {fetched} fetched; "
          f"known sizes add up to {_size(total)}; series: {len(series_names(entries))}")
    return 0
