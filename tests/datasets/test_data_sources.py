"""Replay sources: download from a loopback HTTP server (cached, atomic) and `datasets` loading."""
from __future__ import annotations

import shutil

import pytest

from lab.data import cached_replay_path, download_replay, load_replay, resolve_replay_source
from lab.errors import LabError
from lab.settings import Settings
from tests.paths import EXCERPT


@pytest.fixture
def server(replay_server):
    """The loopback server of conftest.py (serving a copy of the excerpt as replay_full.jsonl)."""
    return replay_server


def test_download_is_cached_atomic_and_reports_progress(server, tmp_path):
    base, hits = server
    url = f"{base}/replay_full.jsonl"
    calls: list[tuple[int, int | None]] = []
    path = download_replay(url, tmp_path, progress=False, on_progress=lambda done, total: calls.append((done, total)))
    assert path == cached_replay_path(url, tmp_path) == tmp_path / "replay_full.jsonl"
    assert path.read_bytes() == EXCERPT.read_bytes()
    size = EXCERPT.stat().st_size
    assert calls and calls[-1] == (size, size)
    assert [p.name for p in tmp_path.iterdir()] == ["replay_full.jsonl"]  # no temp file left
    n = len(hits)
    assert download_replay(url, tmp_path, progress=False) == path and len(hits) == n  # cached
    path.write_text("stale", encoding="utf-8")
    download_replay(url, tmp_path, progress=False, force=True)
    assert len(hits) == n + 1 and path.read_bytes() == EXCERPT.read_bytes()
    assert len(load_replay(path).steps) == 14


def test_download_errors_name_the_url(server, tmp_path):
    base, _ = server
    with pytest.raises(LabError, match=r"nothing\.jsonl failed: HTTP 404"):
        download_replay(f"{base}/nothing.jsonl", tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_settings_resolution_uses_url_sources_and_the_cache(server, tmp_path):
    base, _ = server
    settings = Settings(results_dir=tmp_path / "results", cache_dir=tmp_path / "cache", replay_path=None,
                        replay_url=f"{base}/replay_full.jsonl")
    with pytest.raises(LabError, match="--replay PATH"):  # nothing downloaded unless asked
        resolve_replay_source(None, settings)
    assert not (tmp_path / "cache").exists()
    resolved = resolve_replay_source(settings.replay_url, settings)  # an explicit URL asks for it
    assert resolved.kind == "jsonl" and resolved.path.parent == tmp_path / "cache"
    assert resolve_replay_source(None, settings).path == resolved.path  # now the cached file is used


def test_datasets_loads_local_files_and_folders(tmp_path):
    folder = tmp_path / "ds"
    folder.mkdir()
    shutil.copy(EXCERPT, folder / "part.json")
    resolved = resolve_replay_source(str(folder))
    assert resolved.kind == "datasets" and len(resolved.rows) == 16
    loaded = load_replay(str(folder / "part.json"))
    assert [s.key for s in loaded.steps] == [s.key for s in load_replay(EXCERPT).steps]
    assert loaded.by_key["task-000/5"].messages == load_replay(EXCERPT).by_key["task-000/5"].messages
    with pytest.raises(LabError, match="no .jsonl/.json/.parquet/.csv"):
        resolve_replay_source(str(tmp_path / "ds" / ".." / "ds" / ".."))
