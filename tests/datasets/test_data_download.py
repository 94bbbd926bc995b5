"""The replay file's download is checked before it is kept (issue 29): size, sha256, format, plain bytes,
a deadline; a hostile or wrong server leaves nothing behind and gets one line naming the URL."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import time

import pytest

from lab.data import Expected, check_replay_file, download_replay, load_replay
from lab.errors import LabError
from tests.helpers_app import lab_env, run_lab_cli
from tests.helpers_servers import http_on_loopback
from tests.paths import EXCERPT

BODY = EXCERPT.read_bytes() if EXCERPT.exists() else b""
SHA = hashlib.sha256(BODY).hexdigest()
GZIPPED = gzip.compress(BODY)


def _handler():
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, body: bytes, headers: dict[str, str] | None = None, status: int = 200) -> None:
            self.send_response(status)
            for name, value in (headers or {"Content-Length": str(len(body))}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            path = self.path
            if path == "/replay_full.jsonl":
                self._send(BODY)
            elif path == "/page.jsonl":  # a login or error page served with 200
                self._send(b"<!doctype html><html><body>Sign in</body></html>\n")
            elif path == "/empty.jsonl":
                self._send(b"")
            elif path == "/gzip.jsonl":  # encoded although the lab asked for identity
                self._send(GZIPPED, {"Content-Encoding": "gzip", "Content-Length": str(len(GZIPPED))})
            elif path == "/huge-announced.jsonl":
                self._send(b"", {"Content-Length": str(10 ** 12)})
            elif path == "/endless.jsonl":  # no length, never ends
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    while True:
                        self.wfile.write(BODY)
                except OSError:
                    return
            elif path == "/drip.jsonl":  # a byte now and then, each read within the read timeout
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for byte in BODY:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    return
            elif path == "/loop.jsonl":
                self._send(b"", {"Location": "/loop.jsonl", "Content-Length": "0"}, status=302)
            else:
                self._send(b"", status=404)

    return Handler


@pytest.fixture(scope="module")
def server():
    with http_on_loopback(_handler()) as base:
        yield base


@pytest.fixture
def tight_limits(tmp_path, monkeypatch):
    """The owner's own download limits: 1 MB, a 2 s deadline."""
    limits = tmp_path.parent / f"{tmp_path.name}-limits.yaml"
    limits.write_text("max_bytes: 1000000\nread_timeout_s: 5\ndeadline_s: 2\nmax_redirects: 3\n")
    monkeypatch.setenv("LAB_REPLAY_DOWNLOAD_LIMITS", str(limits))


def fetch(url: str, folder, **kwargs):
    return download_replay(url, folder, progress=False, check=check_replay_file, **kwargs)


def test_the_expected_file_is_kept_where_asked(server, tmp_path):
    out = tmp_path / "baked" / "replay_full.jsonl"
    path = fetch(f"{server}/replay_full.jsonl", tmp_path / "cache", expect=Expected.parse(SHA.upper(), len(BODY)),
                 out=out)
    assert path == out and out.read_bytes() == BODY
    assert [p.name for p in out.parent.iterdir()] == ["replay_full.jsonl"]  # no temporary file left
    assert not (tmp_path / "cache").exists()  # --out: the cache is not used
    assert len(load_replay(out).steps) == 14


@pytest.mark.parametrize(("name", "expect", "message"), [
    ("replay_full.jsonl", Expected(sha256="0" * 64), r"not the expected one: sha256 " + SHA),
    ("replay_full.jsonl", Expected(size=len(BODY) + 1), rf"not the expected one: {len(BODY)} bytes, expected {len(BODY) + 1}"),
    ("replay_full.jsonl", Expected(size=100), r"more than the expected 100 bytes"),
    ("page.jsonl", Expected(), r"not a replay file \(line 1: malformed JSON"),
    ("empty.jsonl", Expected(), r"not a replay file \(no steps in it\)"),
    ("gzip.jsonl", Expected(), r"sent it encoded \(gzip\)"),
    ("huge-announced.jsonl", Expected(), r"announces 1000000000000 bytes, more than the 67108864-byte limit"),
    ("loop.jsonl", Expected(), r"failed: TooManyRedirects"),
    ("missing.jsonl", Expected(), r"failed: HTTP 404"),
])
def test_a_wrong_file_is_refused_and_nothing_is_kept(server, tmp_path, name, expect, message):
    with pytest.raises(LabError, match=message) as caught:
        fetch(f"{server}/{name}", tmp_path, expect=expect)
    assert "\n" not in str(caught.value) and f"{server}/{name}" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_an_endless_or_dripping_body_is_stopped(server, tmp_path, tight_limits):
    with pytest.raises(LabError, match=r"more than the 1000000-byte limit \(max_bytes\); stopped there"):
        fetch(f"{server}/endless.jsonl", tmp_path)
    started = time.monotonic()
    with pytest.raises(LabError, match=r"not complete after 2 s; stopped"):
        fetch(f"{server}/drip.jsonl", tmp_path)
    assert time.monotonic() - started < 8
    assert list(tmp_path.iterdir()) == []


def test_a_cached_file_that_is_not_the_expected_one_is_fetched_again(server, tmp_path):
    url = f"{server}/replay_full.jsonl"
    path = fetch(url, tmp_path)
    path.write_bytes(BODY[:-10])
    assert fetch(url, tmp_path).read_bytes() == BODY[:-10]  # nothing expected: the cache is used as it is
    assert fetch(url, tmp_path, expect=Expected(sha256=SHA)).read_bytes() == BODY


@pytest.mark.parametrize(("sha", "size", "message"), [
    ("abc", None, r"replay sha256 'abc' is not 64 hex digits"),
    ("g" * 64, None, r"is not 64 hex digits"),
    (None, "-5", r"replay size '-5' is not a positive number of bytes"),
    (None, "1e9", r"is not a positive number"),
    (None, "٣٤", r"is not a positive number"),
])
def test_malformed_expectations_are_one_line(sha, size, message):
    with pytest.raises(LabError, match=message):
        Expected.parse(sha, size)


def test_the_cli_refuses_in_one_line_with_exit_2_and_prints_the_hash_to_pin(server, tmp_path):
    out = tmp_path / "replay.jsonl"
    env = lab_env(LAB_CACHE_DIR=str(tmp_path / "cache"))
    bad = run_lab_cli(["data", "download", "--url", f"{server}/replay_full.jsonl", "--sha256", "1" * 64, "--out",
                       str(out), "--quiet"], env=env)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "not the expected one" in bad.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []
    env["LAB_REPLAY_SHA256"] = SHA  # the owner's variable is the default
    good = run_lab_cli(["data", "download", "--url", f"{server}/replay_full.jsonl", "--out", str(out), "--quiet"],
                       env=env)
    assert good.returncode == 0, good.stderr
    assert f"size {len(BODY)} bytes, sha256 {SHA}" in good.stdout and out.read_bytes() == BODY


def test_the_owners_start_time_url_is_held_to_the_same_checks(server, tmp_path, monkeypatch):
    """LAB_REPLAY=URL (a Space variable) with LAB_REPLAY_SHA256: loading refuses a wrong file and keeps nothing."""
    from lab.settings import Settings

    monkeypatch.setenv("LAB_REPLAY_SHA256", "2" * 64)
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    with pytest.raises(LabError, match=r"not the expected one: sha256"):
        load_replay(f"{server}/replay_full.jsonl", settings=Settings())
    monkeypatch.delenv("LAB_REPLAY_SHA256")
    with pytest.raises(LabError, match=r"not a replay file \(line 1"):
        load_replay(f"{server}/page.jsonl", settings=Settings())
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("LAB_REPLAY_SHA256", SHA)
    assert len(load_replay(f"{server}/replay_full.jsonl", settings=Settings()).steps) == 14


def test_a_pinned_url_is_held_to_its_pin_unless_the_owner_gives_another(server, tmp_path, monkeypatch):
    """A URL listed in the replay pins (lab/data/replay_pins.yaml, or LAB_REPLAY_PINS) must have the pinned
    sha256 and size, from the CLI, a cached file or LAB_REPLAY=URL at start; the owner's LAB_REPLAY_SHA256
    (or --sha256) wins over the pin (issue 40 item 6)."""
    from lab.data.download import pinned

    url = f"{server}/replay_full.jsonl"
    pins = tmp_path / "pins.yaml"
    pins.write_text(f"pins:\n  {url}: {{sha256: {'3' * 64}, size: {len(BODY)}}}\n")
    monkeypatch.setenv("LAB_REPLAY_PINS", str(pins))
    assert pinned(url) == Expected("3" * 64, len(BODY)) and pinned(f"{server}/other.jsonl") == Expected()
    with pytest.raises(LabError, match=rf"not the expected one: sha256 {SHA}, expected {'3' * 64}"):
        fetch(url, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
    assert fetch(url, tmp_path / "cache", expect=Expected(sha256=SHA)).read_bytes() == BODY  # the owner's value wins
    with pytest.raises(LabError, match="not the expected one"):  # the cached file is not the pinned one: fetched, refused
        fetch(url, tmp_path / "cache")
    pins.write_text(f"pins:\n  {url}: {{sha256: {SHA}, size: {len(BODY)}}}\n")
    assert fetch(url, tmp_path / "fresh").read_bytes() == BODY
    env = lab_env(LAB_CACHE_DIR=str(tmp_path / "cli"), LAB_REPLAY_PINS=str(pins))
    pins.write_text(f"pins:\n  {url}: {{sha256: {'4' * 64}}}\n")
    bad = run_lab_cli(["data", "download", "--url", url, "--quiet"], env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "expected " + "4" * 64 in bad.stderr
    pins.write_text(f"pins:\n  {url}: not a mapping\n")
    with pytest.raises(LabError, match="is not {sha256: …, size: …}"):
        fetch(url, tmp_path / "again")


def test_a_url_pinned_by_its_shape_must_hold_that_many_steps_and_tasks(server, tmp_path, monkeypatch):
    """The default corrected file is pinned by the shape its manifest states (303 steps, 50 tasks), where its
    digest is not known here: a file of another shape is refused and nothing is kept (issue 40 item 6)."""
    from lab.data.download import pinned_shape
    from lab.settings import DEFAULT_REPLAY_URL

    assert pinned_shape(DEFAULT_REPLAY_URL) == {"steps": 303, "tasks": 50}  # the shipped pins file
    url = f"{server}/replay_full.jsonl"
    pins = tmp_path / "pins.yaml"
    monkeypatch.setenv("LAB_REPLAY_PINS", str(pins))
    pins.write_text(f"pins:\n  {url}: {{steps: 303, tasks: 50}}\n")
    with pytest.raises(LabError, match=r"not the pinned replay file \(\d+ steps, expected 303, 2 tasks, expected 50\)"):
        fetch(url, tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
    pins.write_text(f"pins:\n  {url}: {{tasks: 2}}\n")  # the excerpt's shape: two tasks
    assert fetch(url, tmp_path / "cache").read_bytes() == BODY
    pins.write_text(f"pins:\n  {url}: {{steps: -3}}\n")
    with pytest.raises(LabError, match="steps of .* is not a positive whole number"):
        fetch(url, tmp_path / "other")
