"""`python -m lab results import DIR` (a dataset folder) and `… import hf://datasets/OWNER/NAME`: every config
becomes the result file it was exported from, written under `<results>/datasets/NAME/`, then imported as any
result file is (so a rebuild of the store finds it again). The same figures come back: `lab compare` of a run
and its round trip gives Δ = 0 on identical per-step values."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.errors import LabError
from lab.security.safe_files import entry_exists, link_problem, read_bytes, write_bytes_atomic
from lab.store.dataset.card_read import read_configs
from lab.store.dataset.layout import config_name, limits
from lab.store.dataset.parquet_read import read_config
from lab.store.dataset.restore import reference_result, run_result
from lab.store.db import Store
from lab.store.importer import ImportReport, import_path

IMPORTED_FOLDER = "datasets"  # under the results folder


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, allow_nan=False, indent=1).encode("utf-8")


def destination(results_dir: Path, dataset: str) -> Path:
    """`<results>/datasets/NAME/`, made; LabError when a link stands anywhere on that way."""
    root = Path(results_dir)
    dest = root / IMPORTED_FOLDER / config_name(dataset)
    for part in (root / IMPORTED_FOLDER, dest):
        if part.is_symlink():
            raise LabError(f"{part}: a symbolic link; the lab writes imported datasets only into real folders")
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def write_new(folder: Path, stem: str, suffix: str, content: bytes) -> Path:
    """`folder/STEM.SUFFIX`, or STEM-2 … when that name holds anything else (nothing stored is overwritten, no
    link followed); the same content is left as it is. Written whole (lab.security.safe_files)."""
    n = 1
    while True:
        path = folder / f"{stem if n == 1 else f'{stem}-{n}'}{suffix}"
        if not entry_exists(path):
            return write_bytes_atomic(path, content, replace=False)
        if link_problem(path) is None and read_bytes(path) == content:
            return path
        n += 1


def restore_files(folder: Path, dest: Path) -> list[Path]:
    """The result files (and reference-likelihood files) of every config of the dataset `folder`, written into
    `dest`. All configs are read and checked before anything is written."""
    pending: list[tuple[str, str, bytes]] = []
    total = 0
    for config in read_configs(folder):
        total += sum(p.stat().st_size for p in config.files)
        if total > limits()["max_total_bytes"]:
            raise LabError(f"{folder}: more than {limits()['max_total_bytes']:,} bytes of data files in all")
        table, meta = read_config(config.files, f"config '{config.name}'")
        result = run_result(table, meta, f"config '{config.name}'")
        stem = config_name(config.name)
        pending.append((stem, ".json", _dumps(result)))
        reference = reference_result(table, result)
        if reference is not None:
            pending.append((stem, ".reference.json", _dumps(reference)))
    return [write_new(dest, stem, suffix, content) for stem, suffix, content in pending]


def import_dataset(store: Store, folder: Path, name: str | None = None) -> ImportReport:
    """Import the dataset folder `folder` into `store` (its results folder keeps the files)."""
    if store.results_dir is None:
        raise LabError("the store has no results folder to keep the imported runs in")
    folder = Path(folder)
    dest = destination(store.results_dir, name or folder.resolve().name)
    return import_path(store, *restore_files(folder, dest))
