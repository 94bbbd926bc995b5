"""The dataset's shape: its per-step columns (columns.yaml) as an Arrow schema, the file names, the limits."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import yaml

COLUMNS_PATH = Path(__file__).with_name("columns.yaml")
SPLIT = "steps"  # every config has one split: the run's scored steps
CARD = "README.md"
META_KEY = b"tb2lite_lab"  # the Parquet file's key-value metadata: the run's settings (restore.py reads it)
FORMAT = 1
_TYPES = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
          "bool": pa.bool_(), "list<string>": pa.list_(pa.string())}
_NAME_RX = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 64


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    group: str
    restore: bool


@lru_cache(maxsize=1)
def _file() -> dict:
    return yaml.safe_load(COLUMNS_PATH.read_text(encoding="utf-8"))


def step_columns() -> list[Column]:
    """The per-step columns, in order."""
    return [Column(c["name"], _TYPES[c["type"]], c["group"], bool(c.get("restore", True))) for c in _file()["columns"]]


def sample_type() -> pa.StructType:
    """One sampled answer."""
    return pa.struct([(c["name"], _TYPES[c["type"]]) for c in _file()["samples"]])


def run_schema() -> pa.Schema:
    """The Arrow schema of one run's Parquet file."""
    return pa.schema([*[(c.name, c.type) for c in step_columns()], ("samples", pa.list_(sample_type()))])


def limits() -> dict[str, int]:
    """What an import reads at most (columns.yaml `limits`)."""
    return {k: int(v) for k, v in _file()["limits"].items()}


def config_name(text: str) -> str:
    """A config (and file) name from a run's name: letters, digits, `.`, `_` and `-` only, never a path."""
    name = _NAME_RX.sub("-", str(text)).strip("-._")[:MAX_NAME].strip("-._")
    return name or "run"


def unique_names(names: list[str]) -> list[str]:
    """`config_name` of each, made unique with -2, -3 … in order."""
    out: list[str] = []
    for text in names:
        base = config_name(text)
        name, n = base, 2
        while name.lower() in {o.lower() for o in out}:
            name, n = f"{base}-{n}", n + 1
        out.append(name)
    return out


def data_path(config: str) -> str:
    """Where a config's Parquet file lies in the folder (POSIX, relative)."""
    return f"{config}/{SPLIT}.parquet"
