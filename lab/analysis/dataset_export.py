"""`python -m lab results export RUN… --out DIR`: stored runs as a Hugging Face dataset folder.

DIR gets one config per run (`CONFIG/steps.parquet`, its per-step rows, the run's settings in the file's
metadata) and a dataset card (README.md) whose YAML `configs:` the Hub and `datasets.load_dataset(DIR, CONFIG)`
read. The folder is written beside DIR and moved into place whole: an export that fails leaves nothing.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pyarrow.parquet as pq

from lab.errors import LabError
from lab.store.dataset.card import card_text
from lab.store.dataset.layout import CARD, data_path, unique_names
from lab.store.dataset.rows import ExportedRun, run_rows, with_metadata
from lab.store.db import Store
from lab.analysis.run_pairs import compare_loaded, delta_text, load_run
from lab.store.run_lookup import find_run


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the folder and, per run, its config name and display name."""

    folder: Path
    configs: list[tuple[str, str]]

    def summary(self) -> str:
        lines = [f"wrote {self.folder} ({len(self.configs)} config{'s' if len(self.configs) != 1 else ''})"]
        lines += [f"  {config}: {name}" for config, name in self.configs]
        return "\n".join(lines)


def resolve_runs(store: Store, refs: Sequence[str], published_path: Callable[[str], str | None] | None = None
                 ) -> list[str]:
    """The run ids the references name, in order, each once (LabError naming the first that names none)."""
    ids: list[str] = []
    for ref in refs:
        lookup = (lambda ref=ref: published_path(ref)) if published_path is not None else None
        run_id = find_run(store, ref, published_path=lookup)
        if run_id not in ids:
            ids.append(run_id)
    if not ids:
        raise LabError("no run given: name one or more runs (run id, display name or result file name)")
    return ids


def first_deltas(store: Store, run_ids: Sequence[str], seed: int | None = None) -> list[str]:
    """Each run's score minus the first run's, with its 95 % interval ("" for the first; the reason where the
    two cannot be compared)."""
    first = load_run(store, run_ids[0])
    out = [""]
    for run_id in run_ids[1:]:
        try:
            diff = compare_loaded(first, load_run(store, run_id), ["score"], seed=seed).get("score")
            out.append(delta_text(diff))
        except LabError as exc:
            out.append(str(exc).replace("|", "/")[:200])
    return out


def _target(out: Path) -> Path:
    """DIR, checked: a new folder, or an empty one (LabError otherwise: an export never writes over files)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise LabError(f"--out {out}: not a folder; give a new folder for the dataset")
    if out.is_dir() and any(out.iterdir()):
        raise LabError(f"--out {out}: the folder is not empty; give a new or empty folder (an export never writes "
                       "over files)")
    return out


def write_folder(folder: Path, runs: Sequence[ExportedRun], configs: Sequence[str], deltas: Sequence[str]) -> None:
    """The Parquet files and the card, into `folder` (which exists)."""
    for config, run in zip(configs, runs):
        path = folder / data_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(with_metadata(run), path, compression="zstd")
    (folder / CARD).write_text(card_text(runs, configs, deltas), encoding="utf-8")


def export_runs(store: Store, refs: Sequence[str], out: str | Path, *, seed: int | None = None,
                published_path: Callable[[str], str | None] | None = None) -> Exported:
    """Export the runs `refs` names (run ids, names, result file names) into the dataset folder `out`."""
    target = _target(Path(out))
    run_ids = resolve_runs(store, refs, published_path)
    runs = [run_rows(store, run_id) for run_id in run_ids]
    configs = unique_names([str(r.info["display_name"]) for r in runs])
    deltas = first_deltas(store, run_ids, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        write_folder(staging, runs, configs, deltas)
        if target.is_dir():
            target.rmdir()  # empty (checked above)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Exported(target, [(c, str(r.info["display_name"])) for c, r in zip(configs, runs)])
