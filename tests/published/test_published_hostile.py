"""`python -m lab data published fetch` against a server the lab does not control (issue 18).

Real parts: the CLI as a separate process, a real HTTP server on 127.0.0.1 answering with hostile
bodies, headers and timings, a real DuckDB store. Every case is one line naming the file (and the
field where there is one), exit code 2, and nothing in the cache, results/published/ or the store.
"""
from __future__ import annotations

import gzip
import http.server
import json
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from lab.published import fetch as pub
from lab.published.cache import CHECKS_VERSION
from lab.published.catalogue import load_catalogue, runs_of
from lab.published.limits import LIMITS_PATH
from tests.helpers_app import lab_env, run_lab_cli
from tests.helpers_servers import http_on_loopback
from tests.paths import TB2LITE
from tests.helpers_store import make_results_dir

SAMPLE = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"
pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/tb2lite/published is missing")


def unknown_run():
    """A catalogue run of one file whose size and sha256 the catalogue does not know: only the
    lab's own checks stand between a hostile body and the store."""
    return next(r for r in runs_of(load_catalogue()).values()
                if len(r.files) == 1 and r.files[0].sha256 is None and r.files[0].size is None)


def good_result() -> dict:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def with_f1(raw: str) -> bytes:
    """A real result file whose aggregate avg_command_f1 is the JSON text `raw`."""
    data = good_result()
    text = json.dumps(data)
    old = f'"avg_command_f1": {json.dumps(data["aggregate"]["avg_command_f1"])}'
    assert old in text
    return text.replace(old, f'"avg_command_f1": {raw}', 1).encode()


@contextmanager
def hostile_server(answer):
    """A server on 127.0.0.1 whose GET handler is `answer(handler)`; yields (base URL, hits)."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            try:
                answer(self)
            except (BrokenPipeError, ConnectionResetError):
                pass

    with http_on_loopback(Handler) as url:
        yield url, hits


def send(handler, body: bytes, status: int = 200, headers: dict | None = None) -> None:
    handler.send_response(status)
    for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(body)


def limits_file(tmp_path: Path, **changes) -> Path:
    data = yaml.safe_load(LIMITS_PATH.read_text())
    data.update(changes)
    path = tmp_path / "limits.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def fetch(tmp_path: Path, base: str, run, **limits):
    results = make_results_dir(tmp_path / "lab")
    env = lab_env(LAB_PUBLISHED_BASE_URL=base, LAB_CACHE_DIR=str(tmp_path / "cache"),
                  LAB_PUBLISHED_FETCH_LIMITS=str(limits_file(tmp_path, **limits)))
    started = time.monotonic()
    out = run_lab_cli(["data", "published", "fetch", run.key, "--results", str(results), "--quiet"], env=env)
    return out, time.monotonic() - started, results


def assert_refused(out, results: Path, tmp_path: Path, run, *words: str) -> str:
    """Exit 2, no traceback, one FAILED line naming the file (and `words`), nothing kept anywhere."""
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[-2000:]
    assert "Traceback" not in text, text[-3000:]
    failed = [line for line in text.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and run.files[0].path in failed[0], text[-2000:]
    for word in words:
        assert word in failed[0], failed[0]
    assert not (results / "published").exists() or not any((results / "published").rglob("*.json"))
    cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.name != "index.json"]
    assert cached == [], cached
    return failed[0]


BAD_AGGREGATES = {"a string": '"abc"', "overflow": "1e999", "a list": "[1]", "400 digits": "1" + "0" * 400,
                  "out of range": "7.5", "5000 digits": "1" * 5000}


@pytest.mark.parametrize("case", sorted(BAD_AGGREGATES))
def test_bad_aggregate_fields_are_one_line(tmp_path, case):
    run = unknown_run()
    body = with_f1(BAD_AGGREGATES[case])
    with hostile_server(lambda h: send(h, body)) as (base, _):
        out, _, results = fetch(tmp_path, base, run)
    line = assert_refused(out, results, tmp_path, run)
    assert "avg_command_f1" in line or "digits" in line, line


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_nested_per_step_and_no_steps_are_refused(tmp_path):
    run = unknown_run()
    nested = good_result()
    nested["per_step"] = [[[[row]]] for row in nested["per_step"]]
    deep = json.dumps({**good_result(), "per_step": "@"}).replace('"@"', "[" * 50_000 + "]" * 50_000).encode()
    empty = {**good_result(), "per_step": []}
    huge_idx = json.dumps(good_result()).replace('"step_idx": 0', '"step_idx": ' + "9" * 5000, 1).encode()
    for i, (body, word) in enumerate([(json.dumps(nested).encode(), "per_step[0]"), (deep, "JSON"),
                                      (json.dumps(empty).encode(), "no steps"), (huge_idx, "digits")]):
        with hostile_server(lambda h, b=body: send(h, b)) as (base, _):
            out, _, results = fetch(tmp_path / str(i), base, run)
        assert_refused(out, results, tmp_path / str(i), run, word)


def test_gzip_bomb_is_cut_at_the_cap(tmp_path):
    run = unknown_run()
    bomb = gzip.compress(b" " * 64_000_000, 9)  # ~62 kB on the wire, 64 MB decoded
    with hostile_server(lambda h: send(h, bomb, headers={"Content-Encoding": "gzip"})) as (base, _):
        out, _, results = fetch(tmp_path, base, run, max_file_bytes=1_000_000)
    assert_refused(out, results, tmp_path, run, "larger than 1000000 bytes")


def test_gzip_body_within_the_cap_is_read(tmp_path):
    run = unknown_run()
    body = gzip.compress(SAMPLE.read_bytes())
    with hostile_server(lambda h: send(h, body, headers={"Content-Encoding": "gzip"})) as (base, _):
        out, _, results = fetch(tmp_path, base, run)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (pub.run_file(results, run)).read_bytes() == SAMPLE.read_bytes()


@pytest.mark.slow  # over 5 s: out of the fast loop
def test_slow_drip_and_silent_servers_meet_the_file_deadline(tmp_path):
    run = unknown_run()
    body = SAMPLE.read_bytes()

    def drip(h):
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for byte in body:
            h.wfile.write(bytes([byte]))
            h.wfile.flush()
            time.sleep(0.5)

    with hostile_server(drip) as (base, _):
        out, took, results = fetch(tmp_path / "drip", base, run, file_deadline_s=3, read_timeout_s=2)
    assert_refused(out, results, tmp_path / "drip", run, "deadline")
    assert took < 30, took

    def drip_headers(h):  # a status line, then a header line every second: each read succeeds
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(60):
            h.wfile.write(b"X-Wait: 1\r\n")
            h.wfile.flush()
            time.sleep(1)

    with hostile_server(drip_headers) as (base, _):
        out, took, results = fetch(tmp_path / "headers", base, run, file_deadline_s=3, read_timeout_s=2)
    assert_refused(out, results, tmp_path / "headers", run, "deadline")
    assert took < 30, took

    with hostile_server(lambda h: time.sleep(30)) as (base, hits):  # accepts, never answers
        out, took, results = fetch(tmp_path / "silent", base, run, file_deadline_s=3, read_timeout_s=2)
    assert_refused(out, results, tmp_path / "silent", run)
    assert took < 25, took


@pytest.mark.slow  # about 6 s on two cores: the full run, not the fast loop
def test_redirects_loop_or_leave_the_base(tmp_path):
    run = unknown_run()
    with hostile_server(lambda h: send(h, b"", 302, {"Location": h.path})) as (base, hits):
        out, _, results = fetch(tmp_path / "loop", base, run)
    assert_refused(out, results, tmp_path / "loop", run, "redirects")
    assert len(hits) == 1 + yaml.safe_load(LIMITS_PATH.read_text())["max_redirects"]

    with hostile_server(lambda h: send(h, SAMPLE.read_bytes())) as (elsewhere, other_hits):
        with hostile_server(lambda h: send(h, b"", 302, {"Location": elsewhere + h.path})) as (base, _):
            out, _, results = fetch(tmp_path / "away", base, run)
        assert_refused(out, results, tmp_path / "away", run, "not the configured")
        assert other_hits == []  # the other port was never contacted

    with hostile_server(lambda h: send(h, SAMPLE.read_bytes()) if h.path.startswith("/moved")
                        else send(h, b"", 301, {"Location": "/moved" + h.path})) as (base, hits):
        out, _, results = fetch(tmp_path / "same", base, run)
    assert out.returncode == 0, out.stdout + out.stderr  # a redirect within the base is followed
    assert pub.run_file(results, run).is_file() and hits[-1].startswith("/moved")


def test_a_file_cached_by_an_older_lab_is_checked_again(tmp_path):
    """A 0-step file an older lab fetched and indexed (sha256 matching, no `checks`) is not imported
    as it is: it is checked, discarded, and fetched again."""
    import hashlib

    run = unknown_run()
    entry = run.files[0]
    cache = pub.Cache(tmp_path / "cache")
    empty = json.dumps({**good_result(), "per_step": []}).encode()
    cache.file(entry).parent.mkdir(parents=True)
    cache.file(entry).write_bytes(empty)
    cache.record(entry, {"size": len(empty), "sha256": hashlib.sha256(empty).hexdigest(), "steps": 0})
    with hostile_server(lambda h: send(h, SAMPLE.read_bytes())) as (base, hits):
        report = pub.fetch_entries([entry], tmp_path / "cache", base=base, progress=False)
    assert report.cached == [] and report.downloaded == [entry.path] and len(hits) == 1
    assert cache.file(entry).read_bytes() == SAMPLE.read_bytes()
    assert pub.Cache(tmp_path / "cache").known(entry)["checks"] == CHECKS_VERSION
