"""Published runs: fetch from a loopback server (cache, resume, checks), import, run twice, rescore."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lab.published import fetch as pub
from lab.published.cache import CHECKS_VERSION
from lab.published.catalogue import load_catalogue, runs_of, series_names
from tests.paths import EXCERPT, REPO, TB2LITE
from tests.published_server import catalogue_files, published_server
from tests.helpers_store import make_results_dir

SAMPLE = "llada21_flash_transformers_sample10_suffix_len256"
SMOKE = "llada21_flash_transformers_smoke"

pytestmark = pytest.mark.skipif(not (TB2LITE / "published" / f"{SAMPLE}.json").exists(),
                                reason="../shared/tb2lite/published is missing")


def entry_named(stem: str):
    return next(e for e in load_catalogue() if e.path.endswith(f"/{stem}.json"))


def url_path(entry) -> str:
    return f"/{entry.commit}/{entry.path}"


def test_catalogue_groups_pieces_drops_status_and_finds_series():
    entries = load_catalogue()
    assert entries and not any(".status." in e.path for e in entries)
    runs = runs_of(entries)
    hrm = runs["20260523T_hrm_text_8gpu_direct_m1024_b32/HRM-Text-1B-direct-m1024-b32"]
    assert len(hrm.pieces) == 8 and [f.path.split("/")[-1] for f in hrm.files] == ["HRM-Text-1B-direct-m1024-b32-full.json"]
    series = series_names(entries)
    assert len(series["ECHO RLVR raw (LFM2.5-8B-A1B)"]) == 11
    assert len(series["ECHO RLVR continue (LFM2.5-8B-A1B)"]) == 38
    assert len(series["ECHO RLVR parent run (LFM2.5-8B-A1B)"]) == 14  # with parent-checkpoint-1880 (same folder)
    sample = entry_named(SAMPLE)
    data = (TB2LITE / "published" / f"{SAMPLE}.json").read_bytes()
    assert (sample.size, sample.sha256) == (len(data), hashlib.sha256(data).hexdigest())


def test_merged_pieces_make_one_run():
    data = json.loads((TB2LITE / "published" / f"{SAMPLE}.json").read_text())
    a = {**data, "per_step": data["per_step"][:4]}
    b = {**data, "per_step": data["per_step"][4:]}
    merged = pub.merged_pieces([a, b])
    assert len(merged["per_step"]) == 10
    assert merged["aggregate"]["avg_command_f1"] == data["aggregate"]["avg_command_f1"]


def test_fetch_cli_imports_once_and_twice_changes_nothing(tmp_path):
    import duckdb

    results = make_results_dir(tmp_path)
    env = {**os.environ, "LAB_CACHE_DIR": str(tmp_path / "cache")}
    with published_server() as (base, state):
        env["LAB_PUBLISHED_BASE_URL"] = base
        cmd = [sys.executable, "-m", "lab", "data", "published", "fetch", SAMPLE, SMOKE, "--results", str(results),
               "--quiet"]
        first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr
        assert "2 downloaded" in first.stdout and "2 runs imported" in first.stdout
        files = sorted((results / "published").rglob("*.json"))
        mtimes = [f.stat().st_mtime_ns for f in files]
        con = duckdb.connect(str(results / "lab.duckdb"), read_only=True)
        before = con.execute("SELECT run_id, display_name, source, steps, score FROM runs ORDER BY run_id").fetchall()
        n_steps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
        links = con.execute("SELECT run_key, kind, pieces, leaderboard_row FROM published_runs ORDER BY run_key").fetchall()
        con.close()
        n_requests = len(state.requests)
        second = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stderr
        assert "0 downloaded" in second.stdout and "2 from the cache" in second.stdout and "2 unchanged" in second.stdout
        assert len(state.requests) == n_requests  # nothing fetched again
    assert [f.stat().st_mtime_ns for f in sorted((results / "published").rglob("*.json"))] == mtimes
    con = duckdb.connect(str(results / "lab.duckdb"), read_only=True)
    assert con.execute("SELECT run_id, display_name, source, steps, score FROM runs ORDER BY run_id").fetchall() == before
    assert con.execute("SELECT count(*) FROM steps").fetchone()[0] == n_steps == 11
    assert con.execute("SELECT run_key, kind, pieces, leaderboard_row FROM published_runs ORDER BY run_key").fetchall() == links
    con.close()
    assert {r[2] for r in before} == {"published"}
    sample = next(r for r in before if r[3] == 10)
    assert sample[4] == 12.44
    # the two LLaDA runs share model_path: their display names stay apart
    assert len({r[1] for r in before}) == 2
    # the catalogue's facts are now in the cache index
    facts = json.loads((tmp_path / "cache" / "published" / "index.json").read_text())
    entry = entry_named(SAMPLE)
    assert facts[f"{entry.commit}:{entry.path}"] == {
        "size": entry.size, "sha256": entry.sha256, "model": "inclusionAI/LLaDA2.1-flash", "score": 12.44,
        "steps": 10, "scoring_version": "corrected_303", "checks": CHECKS_VERSION}
    listing = subprocess.run([sys.executable, "-m", "lab", "data", "published", "list"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0 and "cached" in listing.stdout and "37 kB" in listing.stdout


def test_resume_after_a_cut_download(tmp_path):
    entry = entry_named(SAMPLE)
    with published_server() as (base, state):
        state.cut_after[url_path(entry)] = 10_000
        report = pub.fetch_entries([entry], tmp_path, base=base, progress=False, attempts=1)
        assert report.failed and "interrupted" in report.failed[0][1]
        part = pub.Cache(tmp_path).file(entry).with_name(f"{SAMPLE}.json.part")
        assert part.stat().st_size == 10_000
        report = pub.fetch_entries([entry], tmp_path, base=base, progress=False)
        assert report.failed == [] and report.resumed == [entry.path] and report.downloaded == [entry.path]
        assert state.requests[-1] == (url_path(entry), "bytes=10000-")
    content = pub.Cache(tmp_path).file(entry).read_bytes()
    assert hashlib.sha256(content).hexdigest() == entry.sha256 and not part.exists()


def test_retry_resumes_within_one_fetch(tmp_path):
    entry = entry_named(SAMPLE)
    with published_server() as (base, state):
        state.cut_after[url_path(entry)] = 5_000
        report = pub.fetch_entries([entry], tmp_path, base=base, progress=False)
        assert report.failed == [] and report.resumed == [entry.path]
        assert [r for _, r in state.requests] == [None, "bytes=5000-"]
    assert hashlib.sha256(pub.Cache(tmp_path).file(entry).read_bytes()).hexdigest() == entry.sha256


def test_sha256_mismatch_is_rejected(tmp_path):
    entry = entry_named(SMOKE)
    files = catalogue_files()
    files[url_path(entry)] = files[url_path(entry)].replace(b'"model"', b'"Model"', 1)  # same size, other bytes
    with published_server(files) as (base, _):
        report = pub.fetch_entries([entry], tmp_path, base=base, progress=False)
    assert len(report.failed) == 1 and "sha256" in report.failed[0][1]
    cached = pub.Cache(tmp_path).file(entry)
    assert not cached.exists() and not cached.with_name(cached.name + ".part").exists()


def test_non_json_body_is_rejected(tmp_path):
    entry = replace(entry_named(SMOKE), sha256=None, size=None)  # nothing known: the JSON check must catch it
    files = {url_path(entry): b"<html><body>rate limited</body></html>"}
    with published_server(files) as (base, _):
        report = pub.fetch_entries([entry], tmp_path, base=base, progress=False)
    assert len(report.failed) == 1 and "did not send JSON" in report.failed[0][1]
    assert not pub.Cache(tmp_path).file(entry).exists()


def test_rescore_equals_stored_metrics(tmp_path):
    """The lab's scorer reproduces the published files' per-step metrics and aggregate: 0 differences."""
    from lab.runs.rescore import rescore_result

    with published_server() as (base, _):
        entries = [entry_named(SAMPLE), entry_named(SMOKE)]
        assert pub.fetch_entries(entries, tmp_path, base=base, progress=False).failed == []
    keys = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")
    differences = 0
    for entry in entries:
        stored = json.loads(pub.Cache(tmp_path).file(entry).read_bytes())
        again = rescore_result(stored)
        for a, b in zip(stored["per_step"], again["per_step"]):
            differences += sum(a[k] != b[k] for k in keys)
        differences += sum(stored["aggregate"][k] != again["aggregate"][k] for k in stored["aggregate"]
                           if not isinstance(stored["aggregate"][k], dict))
    assert differences == 0


@pytest.mark.skipif(not EXCERPT.exists(), reason="replay excerpt missing")
def test_stored_replay_covers_only_answered_steps(tmp_path):
    """`stored:` of the 10-step sample on the 14-step excerpt: 10 steps, F1 0.1244, as the file says."""
    path = TB2LITE / "published" / f"{SAMPLE}.json"
    out = subprocess.run([sys.executable, "-m", "lab", "replay", "--engine", f"stored:{path}", "--replay", str(EXCERPT),
                          "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / f"{SAMPLE}.json").read_text())
    assert result["aggregate"]["steps"] == 10 and result["aggregate"]["avg_command_f1"] == 0.1244
    assert len(result["per_step"]) == 10


def test_owner_set_is_loaded_at_start(tmp_path, monkeypatch):
    """A Space owner's LAB_PUBLISHED set is fetched and imported when the lab starts."""
    from lab.settings import Settings
    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", public=True)
    with published_server() as (base, _):
        monkeypatch.setenv("LAB_PUBLISHED_BASE_URL", base)
        monkeypatch.setenv("LAB_PUBLISHED", SAMPLE)
        ctx = create_context(settings, [])
    try:
        assert ctx.startup_warnings == []
        rows = ctx.query("SELECT source, steps FROM runs").itertuples(index=False, name=None)
        assert list(rows) == [("published", 10)]
    finally:
        ctx.pool.close_all()
        ctx.store.close()


@pytest.mark.skipif(subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0,
                    reason="unshare -rn (a network namespace with loopback only) is not allowed here")
def test_a_host_that_cannot_be_resolved_is_said_once_not_resume_on_every_line(tmp_path):
    """The default base URL on a machine without DNS (a network namespace with loopback only): one
    FAILED line naming the host, no "resume" advice, no retries, exit 2."""
    results = make_results_dir(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "LAB_PUBLISHED_BASE_URL"}
    env["LAB_CACHE_DIR"] = str(tmp_path / "cache")
    cmd = ["unshare", "-rn", sys.executable, "-m", "lab", "data", "published", "fetch", SAMPLE, SMOKE,
           "--results", str(results), "--quiet"]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "Traceback" not in out.stdout + out.stderr, out.stderr[-2000:]
    failed = [line for line in out.stdout.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1, out.stdout
    assert failed[0].startswith("FAILED 2 files (") and entry_named(SAMPLE).path in failed[0]
    assert "the host raw.githubusercontent.com cannot be resolved" in failed[0]
    assert "resume it" not in out.stdout and "interrupted" not in out.stdout


def test_each_file_reports_its_end(tmp_path):
    """Issue 27 item 4: a fetch tells its caller (the Results tab's progress) each file as it ends,
    not only one byte counter ("processing | 60.8 s" for a whole fetch)."""
    entries = [entry_named(SAMPLE), entry_named(SMOKE)]
    ended: list[tuple[int, int, str]] = []
    with published_server() as (base, _):
        report = pub.fetch_entries(entries, tmp_path, base=base, progress=False,
                                   on_file=lambda done, total, path: ended.append((done, total, path)))
    assert report.failed == [] and sorted(report.downloaded) == sorted(e.path for e in entries)
    assert [(d, t) for d, t, _ in ended] == [(1, 2), (2, 2)]
    assert sorted(p for _, _, p in ended) == sorted(e.path for e in entries)
