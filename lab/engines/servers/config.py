"""The managed-server settings of assets/servers.yaml, read once."""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

import yaml

from lab.errors import EngineSpecError
from lab.settings import PROJECT_ROOT, env, Settings

SERVERS_PATH = PROJECT_ROOT / "assets" / "servers.yaml"


@functools.lru_cache(maxsize=4)
def server_settings(path: str | None = None) -> dict:
    """assets/servers.yaml as a mapping (EngineSpecError naming the file when unreadable)."""
    file = Path(path) if path else SERVERS_PATH
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EngineSpecError(f"cannot read server settings {file}: {exc}") from None
    if not isinstance(data, dict):
        raise EngineSpecError(f"{file}: expected a mapping of settings")
    return data


def log_dir() -> Path:
    """Where server logs go: $LAB_LOG_DIR, else the lab's cache folder's `logs/`."""
    explicit = env("LAB_LOG_DIR")
    return Path(explicit) if explicit else Settings().cache_dir / "logs"


def log_file_name(name: str) -> str:
    """A file name for an engine's log: `Qwen3.5-2B SFT` -> `Qwen3.5-2B_SFT-<16 hex>.log`, the hex a
    hash of the exact name, so names that read alike once made file-safe (`ownermodel!` and
    `ownermodel`) never share a log."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "server") + f"-{digest}.log"
