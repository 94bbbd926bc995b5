"""Where replay records come from: a local `.jsonl`, anything `datasets` loads, or a download."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from lab.data.download import Expected, FileCheck, fetch_checked, pinned
from lab.errors import LabError
from lab.settings import default_cache_dir

DATASETS_FILE_TYPES: dict[str, str] = {  # suffix -> `datasets` builder name
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}
# how to point the lab at a replay file on this machine (said wherever the lab has none)
LOCAL_REPLAY_HINT = "start the lab with --replay PATH or set LAB_REPLAY=PATH (a local replay .jsonl file)"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
ProgressCallback = Callable[[int, int | None], None]


@dataclass
class ReplaySource:
    """A resolved replay source: a local `.jsonl` `path`, or `rows` loaded through `datasets`."""

    kind: str  # "jsonl" | "datasets"
    label: str
    path: Path | None = None
    rows: list[dict] | None = None


def _missing(source: str, url: str | None) -> LabError:
    hint = f", or download the public file ({url}) once with `python -m lab data download`" if url else ""
    return LabError(f"replay source {source!r} not found: pass --replay PATH (a .jsonl replay file){hint}")


def resolve_replay_source(source: str | None, settings=None, split: str = "train",
                          check: FileCheck | None = None) -> ReplaySource:
    """Resolve `source` (or `settings.replay_path`, or the cached download) to records.

    Accepts a local `.jsonl` file, a local json/parquet/csv file or folder (via `datasets`),
    an `http(s)://` URL (downloaded into `settings.cache_dir` once, held to `settings`' expected sha256
    and size and to `check`), or a Hub dataset id `org/name`. Nothing is downloaded unless the source
    asks for it.
    """
    url = getattr(settings, "replay_url", None)
    if source is None:
        source = getattr(settings, "replay_path", None)
    if source is None and settings is not None and url:
        cached = cached_replay_path(url, settings.cache_dir)
        if cached.exists():
            source = str(cached)
    if not source:
        raise _missing("(none given)", url)
    if source.startswith(("http://", "https://")):
        cache_dir = getattr(settings, "cache_dir", None) or default_cache_dir()
        path = download_replay(source, cache_dir, expect=expected_replay(settings), check=check)
        return ReplaySource("jsonl", str(path), path=path)
    path = Path(source).expanduser()
    if path.exists() and not (path.is_file() or path.is_dir()):  # /dev/null, a FIFO: never read (it could block)
        raise LabError(f"replay source {source!r} is not a regular file or folder; pass --replay PATH to a .jsonl file")
    if path.is_file() and path.suffix == ".jsonl":
        return ReplaySource("jsonl", str(path), path=path)
    if path.exists():
        return ReplaySource("datasets", str(path), rows=_load_local_with_datasets(path, split))
    if HUB_ID.match(source) and not source.endswith(tuple(DATASETS_FILE_TYPES)):
        return ReplaySource("datasets", source, rows=_load_with_datasets(source, split))
    raise _missing(source, url)


def expected_replay(settings) -> Expected:
    """The owner's LAB_REPLAY_SHA256 / LAB_REPLAY_SIZE (settings.replay_sha256 / replay_size) as an Expected."""
    return Expected.parse(getattr(settings, "replay_sha256", None), getattr(settings, "replay_size", None))


def _load_local_with_datasets(path: Path, split: str) -> list[dict]:
    try:
        files = [path] if path.is_file() else sorted(
            p for p in path.iterdir() if p.suffix in DATASETS_FILE_TYPES and p.is_file()
        )
    except OSError as exc:
        raise LabError(f"replay source {str(path)!r}: cannot read it: {exc.strerror or exc}") from None
    if not files:
        raise LabError(f"replay source {str(path)!r}: no .jsonl/.json/.parquet/.csv file in it; pass --replay PATH")
    kinds = {DATASETS_FILE_TYPES.get(p.suffix) for p in files}
    if None in kinds or len(kinds) != 1:
        raise LabError(
            f"replay source {str(path)!r}: expected .jsonl, .json, .parquet or .csv files of one kind; pass --replay PATH"
        )
    return _load_with_datasets(kinds.pop(), split, data_files=[str(p) for p in files])


def _load_with_datasets(name: str, split: str, **kwargs) -> list[dict]:
    """`datasets.load_dataset(name, split=...)` rows as plain dicts; errors become LabError."""
    import datasets

    try:
        dataset = datasets.load_dataset(name, split=split, **kwargs)
    except Exception as exc:  # datasets raises many kinds (FileNotFound, DatasetNotFound, connection)
        target = kwargs.get("data_files") or name
        raise LabError(f"replay source {target!r} could not be loaded with `datasets`: {exc}") from exc
    return [dict(row) for row in dataset]


COMMIT_IN_PATH = re.compile(r"/([0-9a-f]{40})/")


def cached_replay_path(url: str, cache_dir: str | Path) -> Path:
    """Where `download_replay` keeps the file of `url`; a URL pinned to a commit gets the commit's
    first 8 characters in the name (the corrected and the legacy file never share a cache slot)."""
    path = urlparse(url).path
    name = Path(path).name or "replay.jsonl"
    pinned = COMMIT_IN_PATH.search(path)
    if pinned:
        stem, dot, suffix = name.rpartition(".")
        name = f"{stem}.{pinned.group(1)[:8]}.{suffix}" if dot else f"{name}.{pinned.group(1)[:8]}"
    return Path(cache_dir) / name


def download_replay(
    url: str | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    force: bool = False,
    on_progress: ProgressCallback | None = None,
    expect: Expected | None = None,
    check: FileCheck | None = None,
    out: str | Path | None = None,
) -> Path:
    """Download the public replay file into `cache_dir` (once; `out`: to that path instead) and return its path.

    The file is checked before it is kept (`lab.data.download.fetch_checked`: size cap, `expect`ed size and
    sha256, plain bytes, deadline, then `check`, the format) and renamed into place atomically, so an
    interrupted or refused download never leaves a file. A cached file that is not the `expect`ed one is
    downloaded again. Without an `expect`ed sha256 or size, those replay_pins.yaml lists for `url` are
    expected. `on_progress(done, total)` is called per chunk (for the UI); `progress` shows a tqdm
    bar. `force=True` re-downloads.
    """
    from lab.settings import DEFAULT_REPLAY_URL, Settings

    url = url or DEFAULT_REPLAY_URL
    if expect is None or (expect.sha256 is None and expect.size is None):  # the owner's own values win
        expect = pinned(url)
    if out is not None:
        target = Path(out)
    else:
        cache_dir = Path(cache_dir) if cache_dir is not None else Settings().cache_dir
        target = cached_replay_path(url, cache_dir)
    if target.is_file() and not force and expect.problem(target) is None:
        return target
    try:
        return fetch_checked(url, target, expect, check, progress, on_progress)
    except LabError as exc:
        raise LabError(f"{exc}; pass --replay PATH") from None
