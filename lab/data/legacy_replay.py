"""The legacy 386-step replay (pinned commit 612f5755) that legacy published runs were scored on.

Where it comes from, in order: $LAB_LEGACY_REPLAY (a .jsonl path), else the cached
`python -m lab data download --legacy` file. It is loaded in `mode="all"` (the 386-step rule:
turns with invalid or empty references are kept), once per file version.
"""
from __future__ import annotations

import threading
from pathlib import Path

from lab.data.replay import ReplaySet, load_replay
from lab.data.sources import cached_replay_path
from lab.errors import LabError
from lab.settings import LEGACY_REPLAY_URL, env

LEGACY_ENV = "LAB_LEGACY_REPLAY"
GET_IT = "python -m lab data download --legacy"
_CACHE: dict[tuple[str, float], ReplaySet] = {}
_LOCK = threading.Lock()


def legacy_replay_path(settings=None) -> Path | None:
    """The legacy replay file to use, or None when there is none ($LAB_LEGACY_REPLAY, else the cached download)."""
    explicit = env(LEGACY_ENV)
    if explicit:
        return Path(explicit).expanduser()  # a missing file is an error when loading, never silently skipped
    cache_dir = getattr(settings, "cache_dir", None)
    if cache_dir is None:
        from lab.settings import Settings

        cache_dir = Settings().cache_dir
    cached = cached_replay_path(LEGACY_REPLAY_URL, cache_dir)
    return cached if cached.is_file() else None


def load_legacy_replay(settings=None) -> ReplaySet | None:
    """The legacy replay in `mode="all"` (cached per path and mtime); None when none is available.
    A file that cannot be read raises LabError naming it."""
    path = legacy_replay_path(settings)
    if path is None:
        return None
    if not path.is_file():
        raise LabError(f"${LEGACY_ENV}={path}: no such file; point it at the legacy .jsonl or run `{GET_IT}`")
    key = (str(path), path.stat().st_mtime)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            try:
                found = load_replay(str(path), mode="all", lenient=True, settings=settings)
            except LabError as exc:
                raise LabError(f"legacy replay {path}: {exc}; set ${LEGACY_ENV} or run `{GET_IT}`") from None
            _CACHE.clear()
            _CACHE[key] = found
    return found


def missing_legacy_replay_message() -> str:
    """What a legacy column says when no legacy replay is available."""
    return (f"no legacy 386-step replay available: get it with `{GET_IT}` (or set ${LEGACY_ENV}); until then this "
            "column is an approximation: the legacy scorer on the loaded replay's steps and references")
