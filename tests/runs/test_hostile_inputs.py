"""No traceback for any input (issue 9, defects 5, 6, 12): each bad input gives one line naming it and exit code 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lab.resultfiles.units import coerce_units
from lab.scoring.parse import parse_action
from tests.helpers_servers import free_port, stop_process, wait_http
from tests.paths import EXCERPT, GOLDEN, REPO

GOLDEN_ROW = json.loads(GOLDEN.read_text(encoding="utf-8").splitlines()[0])
DEEP = 100_000


def run_lab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0]


def excerpt_lines() -> list[bytes]:
    return EXCERPT.read_bytes().splitlines()


def replay_cli(replay: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_lab("replay", "--replay", str(replay), "--engine", "reference", "--out", str(out), *extra)


def unreadable(path: Path) -> Path:
    """A file the lab cannot read (root reads everything, so a link to /proc/self/mem, which fails with EIO)."""
    if os.geteuid() != 0:
        path.write_text("{}\n")
        path.chmod(0)
        return path
    if not Path("/proc/self/mem").exists():
        pytest.skip("no unreadable file can be made here")
    path.symlink_to("/proc/self/mem")
    return path


def test_non_utf8_replay_line_is_named_and_lenient_skips_it(tmp_path):
    lines = excerpt_lines()
    replay = tmp_path / "latin1.jsonl"
    replay.write_bytes(b"\n".join([lines[0], lines[1].replace(b'"', b'"\xe9', 1), *lines[2:]]) + b"\n")
    assert_one_line_error(replay_cli(replay, tmp_path / "runs"), f"{replay}:2", "UTF-8")
    proc = replay_cli(replay, tmp_path / "runs", "--lenient")
    assert proc.returncode == 0, proc.stderr
    assert f"{replay}:2" in proc.stderr and "UTF-8" in proc.stderr
    result = json.loads(next((tmp_path / "runs").glob("*.json")).read_text())
    assert all(r["task_id"] for r in result["per_step"]) and result["per_step"]


def test_deeply_nested_replay_line_is_named_and_lenient_skips_it(tmp_path):
    lines = excerpt_lines()
    replay = tmp_path / "deep.jsonl"
    replay.write_bytes(b"\n".join([lines[0], b"[" * DEEP + b"]" * DEEP, b'{"a": ' * 70 + b"1" + b"}" * 70,
                                   *lines[1:]]) + b"\n")
    assert_one_line_error(replay_cli(replay, tmp_path / "runs"), f"{replay}:2", "nested")
    proc = replay_cli(replay, tmp_path / "runs", "--lenient")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{replay}:2" in proc.stderr and f"{replay}:3" in proc.stderr


def test_deeply_nested_result_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"per_step": ' + "[" * DEEP + "]" * DEEP + "}")
    assert_one_line_error(run_lab("rescore", str(path), "-o", str(tmp_path / "o.json")), str(path), "nested")
    nested_row = dict(GOLDEN_ROW, extra={"a": json.loads('{"b": ' * 80 + "1" + "}" * 80)})
    path.write_text(json.dumps({"per_step": [nested_row]}))
    assert_one_line_error(run_lab("rescore", str(path), "-o", str(tmp_path / "o.json")), str(path), "nested")


@pytest.mark.parametrize("units", ["1+" * DEEP + "1", "-" * DEEP + "1", "[" * DEEP + "]" * DEEP, "(" * DEEP + ")" * DEEP,
                                   "['ls', " * 200_000 + "'x']", "[" + "1," * 300_000 + "]"],
                         ids=["recursive-sum", "recursive-minus", "nested", "nested-tuple", "huge", "numbers"])
def test_units_stored_as_hostile_repr_strings(tmp_path, units):
    path = tmp_path / "units.json"
    path.write_text(json.dumps({"per_step": [dict(GOLDEN_ROW, pred_command_units=units)]}))
    out = tmp_path / "out.json"
    proc = run_lab("rescore", str(path), "-o", str(out))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    [row] = json.loads(out.read_text())["per_step"]
    assert isinstance(row["pred_command_units"], list) and all(isinstance(u, str) for u in row["pred_command_units"])


def test_repr_units_decode_without_evaluating():
    units = ["ls -la", "cat 'a b'", 'echo "x"', "tab\there", "é ü €", "back\\slash", "new\nline"]
    assert coerce_units(repr(units)) == units
    assert coerce_units(repr(tuple(units))) == units
    assert coerce_units("[ -f foo ]") == ["[ -f foo ]"]  # a shell test, not a list
    assert coerce_units("__import__('os').system('true')") == ["__import__('os').system('true')"]
    with pytest.raises(ValueError, match="lone UTF-16 surrogate"):  # Python reads it; no UTF-8 file holds it
        coerce_units("['ls', '\\ud800a']")
    assert coerce_units("['\\U0001f600']") == ["\U0001f600"]  # an astral escape is one real character


@pytest.mark.parametrize("kind", ["dev-null", "fifo", "folder", "unreadable"])
def test_replay_from_devices_fifos_and_unreadable_files(tmp_path, kind):
    if kind == "dev-null":
        replay = Path("/dev/null")
    elif kind == "fifo":
        replay = tmp_path / "pipe.jsonl"
        os.mkfifo(replay)
    elif kind == "folder":
        replay = tmp_path / "folder.jsonl"
        replay.mkdir()
    else:
        replay = unreadable(tmp_path / "locked.jsonl")
    assert_one_line_error(replay_cli(replay, tmp_path / "runs"), str(replay))


@pytest.mark.parametrize("kind", ["dev-null", "fifo", "unreadable"])
def test_rescore_and_import_from_devices_fifos_and_unreadable_files(tmp_path, kind):
    if kind == "dev-null":
        path = Path("/dev/null")
    elif kind == "fifo":
        path = tmp_path / "pipe.json"
        os.mkfifo(path)
    else:
        path = unreadable(tmp_path / "locked.json")
    assert_one_line_error(run_lab("rescore", str(path), "-o", str(tmp_path / "o.json")), str(path))
    results = tmp_path / "results"
    results.mkdir()
    proc = run_lab("results", "--results", str(results), "--db", str(tmp_path / "lab.duckdb"), "import", str(path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"FAILED {path}" in proc.stdout


@pytest.mark.parametrize("args, words", [
    (["--chunk-size", "0"], ["--chunk-size", ">= 1"]),
    (["--chunk-size", "-5"], ["--chunk-size", ">= 1"]),
    (["--limit", "-1"], ["--limit", ">= 0"]),
    (["--temperature", "nan"], ["--temperature"]),
    (["--top-p", "0"], ["--top-p"]),
])
def test_cli_numbers_are_validated(tmp_path, args, words):
    out = tmp_path / "runs"
    proc = replay_cli(EXCERPT, out, *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    for word in words:
        assert word in last
    assert not out.exists() or not list(out.glob("*.json"))


def test_replay_api_refuses_a_zero_chunk_size(tmp_path):
    from lab.data import load_replay
    from lab.engines import create_engine
    from lab.errors import LabError
    from lab.runs.replay import ReplayConfig, replay

    engine = create_engine("reference")
    engine.load()
    with pytest.raises(LabError, match="chunk size"):
        replay(engine, load_replay(EXCERPT).steps, ReplayConfig(out_dir=tmp_path, chunk_size=0))
    assert not list(tmp_path.glob("*.json"))


def test_fenced_json_extraction_is_linear():
    """256 KB of "```{" took 3.1 s with the backtracking regex; bench/fence_parse.py gives the figure."""
    text = "```{" * 65536
    start = time.perf_counter()
    action = parse_action(text)
    assert time.perf_counter() - start < 0.5
    assert not action.valid_json


def test_app_starts_with_dev_null_as_replay(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "app.py", "--replay", "/dev/null", "--results", str(results), "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "LAB_DB": str(tmp_path / "lab.duckdb")},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", timeout=180, proc=proc)
        config = httpx.get(f"http://127.0.0.1:{port}/config", timeout=30).text
        assert "/dev/null" in config and "not a regular file" in config
    finally:
        stop_process(proc)
    err = proc.stderr.read()
    assert "Traceback" not in err and "/dev/null" in err


def _self_listing(tmp_path: Path) -> str:
    listing = tmp_path / "self.txt"
    listing.write_text(f"reference\n@{listing}\n")
    return f"@{listing}"


@pytest.mark.parametrize("args, words", [
    (["sweep", "--engine", "vllm:/ckpt-{1..1000000000}"], ["expands to 1,000,000,000 engines"]),
    (["sweep", "--engine", "vllm:/r-{1..100}/c-{1..100}"], ["expands to 10,000 engines"]),
    (["sweep", "--engine", "vllm:/c-{1..%s}" % ("9" * 5000)], ["at most 18 digits"]),
    (["sweep", "--engine", "SELF"], ["names itself"]),
    (["sweep", "--engine", "reference", "--ray", "a" * 5000], ["cannot reach the Ray cluster"]),
    (["sweep", "--engine", "reference", "--ray", "http://x"], ["expected HEAD:PORT"]),
    (["sweep", "--engine", "vllm:/m?kv_cache_gb=nan", "--ray", "127.0.0.1:1"], ["cannot reach the Ray cluster"]),
    (["replay", "--engine", "vllm:/m?kv_cache_gb=1e400"], ["kv_cache_gb", "finite"]),
    (["replay", "--engine", "openai:http://" + "a" * 300 + "/v1#m"], ["no valid host"]),
    (["equiv", "--cwd", "/", "--ref", "[" * 50_000, "--pred", "[]"], ["--ref", "nested deeper"]),
    (["equiv", "--cwd", "/", "--ref", "[" + "9" * 5000 + "]", "--pred", "[]"], ["--ref", "longer than"]),
])
def test_this_rounds_commands_refuse_hostile_arguments_in_one_line(tmp_path, args, words):
    """Arguments a fuzzing session threw at `sweep`, `equiv` and the new engine options: each was a traceback
    (RecursionError, UnicodeError, OverflowError, a billion-engine list) or a hang before; now one line, exit 2."""
    args = [_self_listing(tmp_path) if a == "SELF" else a for a in args]
    if args[0] in ("sweep", "replay"):
        args += ["--replay", str(EXCERPT), "--limit", "1", "--out", str(tmp_path / "runs")]
    assert_one_line_error(run_lab(*args, timeout=60), *words)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*.json"))
