"""`python -m lab results export RUN… --out DIR [--push-to-hub OWNER/NAME]` and the dataset sources of
`python -m lab results import` (a dataset folder, hf://datasets/OWNER/NAME)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Sequence

from lab.settings import Settings
from lab.store.db import Store
from lab.store.importer import ImportReport, import_path

PublishedPath = Callable[[str, Settings], str | None]  # ref, settings -> a published run's stored path
ExportRuns = Callable[..., Any]  # lab.analysis.dataset_export.export_runs


def add_export_arguments(sub) -> None:
    p = sub.add_parser("export", help="write stored runs as a Hugging Face dataset folder (one Parquet config per "
                                      "run and a dataset card); optionally push it to the Hub",
                       description="Write stored runs as a Hugging Face dataset folder: one config per run "
                                   "(CONFIG/steps.parquet, its per-step rows) and a dataset card (README.md) "
                                   "with the runs' scores, intervals, settings and replay. "
                                   "datasets.load_dataset(DIR, CONFIG) reads it; `results import DIR` reads it back.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="a run id, display name or result file name of the store, "
                                                          "or a published run")
    p.add_argument("--out", required=True, metavar="DIR", help="the dataset folder to write (new or empty)")
    p.add_argument("--push-to-hub", metavar="OWNER/NAME", default=None,
                   help="then upload the folder to this dataset repository (huggingface_hub; token from HF_TOKEN or "
                        "`hf auth login`; never on a public deployment)")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: make a new repository private")
    p.add_argument("--seed", type=int, default=None, help="bootstrap seed of the card's intervals")


def run_export(store: Store, args: argparse.Namespace, export_runs: ExportRuns,
               published_path: PublishedPath | None = None) -> int:
    """Export (and push) as the arguments say; prints what was written. `export_runs`: lab.analysis's (the
    card's intervals come from the analysis, above the store: lab.cli passes it)."""
    from lab.store.dataset.hub import check_push, push

    settings = Settings()
    if args.push_to_hub:  # checked before anything is written
        check_push(args.push_to_hub, settings.public)
    lookup = (lambda ref: published_path(ref, settings)) if published_path is not None else None
    exported = export_runs(store, args.runs, args.out, seed=args.seed, published_path=lookup)
    print(exported.summary())
    if args.push_to_hub:
        print(f"pushed: {push(exported.folder, args.push_to_hub, public=settings.public, private=args.private)}")
    return 0


def import_paths(store: Store, paths: Sequence[str]) -> ImportReport:
    """Import each path: a result file or folder of them, a dataset folder, or an hf://datasets/ source."""
    from lab.store.dataset.card_read import is_dataset_folder
    from lab.store.dataset.hub import is_hub_source

    report = ImportReport()
    for text in paths:
        if is_hub_source(text):
            from lab.store.dataset.hub import pull
            from lab.store.dataset.importing import import_dataset

            folder, source = pull(text, Settings().cache_dir)
            report.merge(import_dataset(store, folder, source.folder_name))
        elif is_dataset_folder(Path(text)):
            from lab.store.dataset.importing import import_dataset

            report.merge(import_dataset(store, Path(text)))
        else:
            report.merge(import_path(store, text))
    return report
