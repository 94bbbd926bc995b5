"""Read a dataset folder's card: its YAML header's `configs:` and the Parquet files each names, checked.

The card is input like any other: its size is capped, its YAML may hold no aliases (a few lines of them
expand to gigabytes), and every file a config names must lie inside the folder, no link leading out.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from lab.errors import LabError
from lab.jsontext import one_line
from lab.store.dataset.layout import CARD, limits

MAX_FILES_PER_CONFIG = 64


@dataclass(frozen=True)
class Config:
    """One config of the card: its name and its Parquet files (inside the folder)."""

    name: str
    files: list[Path]


def card_header(folder: Path) -> dict[str, Any] | None:
    """The YAML header of `folder`'s README.md (None: no card, or a card without a header)."""
    card = folder / CARD
    if not card.is_file():
        return None
    size = card.stat().st_size
    if size > limits()["max_card_bytes"]:
        raise LabError(f"{card}: {size:,} bytes, more than a dataset card may hold ({limits()['max_card_bytes']:,})")
    text = card.read_bytes().decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end < 0:
        raise LabError(f"{card}: its YAML header (from the first ---) has no closing ---")
    head = text[3:end]
    if len(head.encode("utf-8")) > limits()["max_card_yaml_bytes"]:
        raise LabError(f"{card}: its YAML header is larger than {limits()['max_card_yaml_bytes']:,} bytes")
    return _safe_yaml(head, card)


def _safe_yaml(text: str, card: Path) -> dict[str, Any]:
    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.SafeLoader)):
            raise LabError(f"{card}: its YAML header uses aliases (*name); a dataset card needs none")
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise LabError(f"{card}: its YAML header is not valid YAML ({one_line(exc, 160)})") from None
    except RecursionError:
        raise LabError(f"{card}: its YAML header is nested too deep") from None
    if not isinstance(data, dict):
        raise LabError(f"{card}: its YAML header is not a mapping of fields")
    return data


def is_dataset_folder(folder: Path) -> bool:
    """A folder whose card declares `configs:` (a Hugging Face dataset folder, as `results export` writes)."""
    try:
        header = card_header(folder) if folder.is_dir() else None
    except (LabError, OSError):
        return True  # a card that is there but broken: the dataset import says what is wrong with it
    return bool(header and "configs" in header)


def _inside(folder: Path, pattern: Any, where: str) -> list[Path]:
    """The files a `data_files` path or pattern names, each inside `folder` (LabError otherwise)."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise LabError(f"{where}: a data file path must be text, got {one_line(repr(pattern), 60)}")
    rel = PurePosixPath(pattern.replace("\\", "/"))
    if rel.is_absolute() or ".." in rel.parts or "://" in pattern or ":" in rel.parts[0]:
        raise LabError(f"{where}: data file '{one_line(pattern, 80)}' is not a path inside the dataset folder")
    root = folder.resolve()
    found = sorted(folder.glob(str(rel))) if any(c in pattern for c in "*?[") else [folder / rel]
    out = []
    for path in found[:MAX_FILES_PER_CONFIG + 1]:
        real = path.resolve()
        if real != root and root not in real.parents:
            raise LabError(f"{where}: data file '{one_line(pattern, 80)}' leads outside the dataset folder")
        if not real.is_file():
            raise LabError(f"{where}: data file '{one_line(pattern, 80)}' is not a file of the folder")
        if real.suffix != ".parquet":
            raise LabError(f"{where}: data file '{one_line(pattern, 80)}' is not a .parquet file")
        out.append(real)
    if len(out) > MAX_FILES_PER_CONFIG:
        raise LabError(f"{where}: more than {MAX_FILES_PER_CONFIG} data files")
    if not out:
        raise LabError(f"{where}: data file pattern '{one_line(pattern, 80)}' names no file")
    return out


def _data_files(folder: Path, value: Any, where: str) -> list[Path]:
    entries = value if isinstance(value, list) else [value]
    files: list[Path] = []
    for entry in entries:
        paths = entry.get("path") if isinstance(entry, dict) else entry
        for pattern in paths if isinstance(paths, list) else [paths]:
            files += _inside(folder, pattern, where)
    return files


def read_configs(folder: Path) -> list[Config]:
    """The configs of the dataset folder's card, each with its Parquet files (LabError naming the problem)."""
    header = card_header(folder)
    if not header or "configs" not in header:
        raise LabError(f"{folder}: no dataset card (README.md with a YAML `configs:` list) in this folder")
    configs = header["configs"]
    if not isinstance(configs, list) or not configs:
        raise LabError(f"{folder / CARD}: `configs:` must be a non-empty list")
    if len(configs) > limits()["max_configs"]:
        raise LabError(f"{folder / CARD}: {len(configs)} configs, more than an import reads ({limits()['max_configs']})")
    out, seen = [], set()
    for i, entry in enumerate(configs):
        where = f"{folder / CARD}: configs[{i}]"
        name = entry.get("config_name", "default") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise LabError(f"{where}: needs a config_name (text)")
        if name in seen:
            raise LabError(f"{where}: config '{one_line(name, 60)}' appears twice")
        seen.add(name)
        out.append(Config(name, _data_files(folder, entry.get("data_files"), f"{where} ({one_line(name, 40)})")))
    return out
