"""A link in the results' published folder or the download cache is never written through: the fetched run
replaces the link itself, and the cache's index is written to a fresh temporary file."""
from __future__ import annotations

from lab.published.cache import Cache
from lab.published.catalogue import load_catalogue, runs_of
from lab.published.fetch import run_file, write_run_file

PRECIOUS = "precious\n"


def test_a_linked_run_file_or_cache_index_is_replaced_not_written_through(tmp_path):
    run = next(r for r in runs_of(load_catalogue()).values() if len(r.files) == 1)
    cache = Cache(tmp_path / "cache")
    source = cache.file(run.files[0])
    source.parent.mkdir(parents=True)
    source.write_bytes(b'{"fetched": true}')
    outside = tmp_path / "elsewhere.txt"
    outside.write_text(PRECIOUS)
    target = run_file(tmp_path / "results", run)
    target.parent.mkdir(parents=True)
    target.symlink_to(outside)
    target.with_name(target.name + ".tmp").symlink_to(outside)  # the temporary name an older lab used
    assert write_run_file(run, cache, tmp_path / "results") == target
    assert not target.is_symlink() and target.read_bytes() == b'{"fetched": true}'
    cache.root.mkdir(parents=True, exist_ok=True)
    cache.index_path.symlink_to(outside)
    cache.index_path.with_suffix(".tmp").symlink_to(outside)
    cache.record(run.files[0], {"size": 17})
    assert not cache.index_path.is_symlink() and outside.read_text() == PRECIOUS
