"""Property tests (hypothesis): the replay-record parser and the result-file parser never raise
anything but the lab's own errors, whatever bytes they get (2,000 generated inputs in all)."""
from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.data import load_replay
from lab.errors import LabError
from lab.runs.rescore import rescore_result
from lab.resultfiles.files import parse_result_bytes
from lab.store.records import run_row, steps_table
from tests.paths import EXCERPT, GOLDEN

EXAMPLES = 1000
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Values are built by a small generator driven by hypothesis's `randoms()`: one draw per input keeps
# 2,000 inputs within seconds (hypothesis's own recursive strategies cost ~10 ms per input).
CHARS = list("a Z0{}[]\"':,\\\n\t\r\x00\ufeffé€😀") + ["\ud800", "\u2028", "\U0010ffff"]


def text(rnd: random.Random, size: int = 12) -> str:
    return "".join(rnd.choice(CHARS) if rnd.random() < 0.8 else chr(rnd.randrange(0x20, 0xD7FF))
                   for _ in range(rnd.randrange(size)))


def json_value(rnd: random.Random, depth: int = 3) -> object:
    """A random JSON value: scalars of every type (NaN, ±Infinity, huge ints included), lists, objects."""
    pick = rnd.randrange(10 if depth > 0 else 7)
    if pick == 0:
        return None
    if pick == 1:
        return rnd.random() < 0.5
    if pick == 2:
        return rnd.choice([0, -1, 1, 2**31, 2**40, 2**70, -(2**63), rnd.randrange(-1000, 1000)])
    if pick == 3:
        return rnd.choice([0.0, -0.5, 1e308, float("nan"), float("inf"), float("-inf"), rnd.random()])
    if pick in (4, 5, 6):
        return text(rnd)
    if pick in (7, 8):
        return [json_value(rnd, depth - 1) for _ in range(rnd.randrange(4))]
    return {text(rnd, 6): json_value(rnd, depth - 1) for _ in range(rnd.randrange(4))}


def deep(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth if depth % 2 else b"[" * depth + b"]" * depth


def mutate(rnd: random.Random, data: bytes) -> bytes:
    """Flip, cut or insert a few bytes (invalid UTF-8 and broken JSON included)."""
    data = bytearray(data)
    for _ in range(rnd.randrange(1, 4)):
        if not data:
            break
        i = rnd.randrange(len(data))
        choice = rnd.randrange(3)
        if choice == 0:
            data[i] = rnd.randrange(256)
        elif choice == 1:
            del data[i : i + rnd.randrange(1, 20)]
        else:
            data[i:i] = rnd.choice([b"\xff", b"\xc3", b"NaN", b"[", b"{", b'"', b"\\", b"1e999"])
    return bytes(data)


EXCERPT_LINES = EXCERPT.read_bytes().splitlines()
RECORD = json.loads(EXCERPT_LINES[0])
MESSAGES_RECORD = {**RECORD, "messages": [{"role": "user", "content": RECORD["prompt"]}]}
CONVERSATION = {"conversations": [{"role": "user", "content": "hi"},
                                  {"role": "assistant", "content": RECORD["ref_raw"]}], "_source_file": "a/b"}
RECORDS = [RECORD, MESSAGES_RECORD, CONVERSATION]

GOLDEN_ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
RESULT = {"model": "m", "model_short": "m", "timestamp": "2026-06-12T00:00:00", "aggregate": {},
          "per_step": [r for r in GOLDEN_ROWS if r["scoring_version"] == "corrected_303"][:3]}
ROW_FIELDS = sorted({k for r in GOLDEN_ROWS for k in r} | {"latency_s", "prompt_tokens", "stop_reason", "raw_output"})
TOP_FIELDS = ["model", "model_path", "aggregate", "per_step", "prompt_template", "gen_time_sec", "timestamp"]


def deep(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth if depth % 2 else b"[" * depth + b"]" * depth


def replay_line(rnd: random.Random) -> bytes:
    kind = rnd.randrange(7)
    if kind == 0:
        return rnd.randbytes(rnd.randrange(120))
    if kind == 1:
        return json.dumps(json_value(rnd)).encode("utf-8")
    if kind == 2:
        return deep(rnd.choice([rnd.randrange(1, 80), 1000, 5000]))
    if kind == 3:
        return rnd.choice(EXCERPT_LINES)
    record = json.loads(json.dumps(rnd.choice(RECORDS)))
    for _ in range(rnd.randrange(4)):
        key = rnd.choice(sorted(record) + ["step_idx", "task_id", "messages", "extra", "conversations"])
        record[key] = json_value(rnd)
    line = json.dumps(record).encode("utf-8")
    return mutate(rnd, line) if kind == 6 else line


@pytest.fixture(scope="module")
def scratch():
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(prefix="lab-property-", dir=shm if shm.is_dir() else None) as folder:
        yield Path(folder)


@SETTINGS
@given(rnd=st.randoms(use_true_random=False), bom=st.booleans(), lenient=st.booleans(),
       mode=st.sampled_from(["corrected", "all"]))
@pytest.mark.slow  # about 4 s on two cores: the full run, not the fast loop
def test_replay_record_parser_raises_only_lab_errors(scratch, rnd, bom, lenient, mode):
    lines = [replay_line(rnd) for _ in range(rnd.randrange(5))]
    path = scratch / "replay.jsonl"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines))
    try:
        replay_set = load_replay(path, mode=mode, lenient=lenient)
    except LabError:
        return
    keys = [s.key for s in replay_set.steps]
    assert len(keys) == len(set(keys)) and len(replay_set.fingerprint) == 64
    assert all(0 <= s.step_idx <= 100_000 for s in replay_set.steps)


def result_bytes(rnd: random.Random) -> bytes:
    kind = rnd.randrange(6)
    if kind == 0:
        return rnd.randbytes(rnd.randrange(200))
    if kind == 1:
        return json.dumps(json_value(rnd)).encode("utf-8")
    if kind == 2:
        return b'{"per_step": [' + deep(rnd.choice([rnd.randrange(1, 80), 1000, 5000])) + b"]}"
    result = json.loads(json.dumps(RESULT))
    for _ in range(rnd.randrange(4)):
        rows = result.get("per_step")
        if rnd.random() < 0.6 and isinstance(rows, list) and rows:
            i = rnd.randrange(len(rows))
            if isinstance(rows[i], dict):
                value = repr([text(rnd) for _ in range(3)]) if rnd.random() < 0.2 else json_value(rnd)
                rows[i][rnd.choice(ROW_FIELDS)] = value
            else:
                rows[i] = json_value(rnd)
        elif rnd.random() < 0.2 and isinstance(rows, list) and rows:
            rows.append(dict(rows[0]) if isinstance(rows[0], dict) else rows[0])  # a duplicate key
        else:
            result[rnd.choice(TOP_FIELDS)] = json_value(rnd)
    content = json.dumps(result).encode("utf-8")
    return mutate(rnd, content) if kind == 5 else content


@SETTINGS
@given(rnd=st.randoms(use_true_random=False), bom=st.booleans())
def test_result_file_parser_raises_only_lab_errors_and_what_it_accepts_imports(rnd, bom):
    content = result_bytes(rnd)
    try:
        result = parse_result_bytes((b"\xef\xbb\xbf" if bom else b"") + content, "prop.json")
    except LabError as exc:
        assert str(exc).startswith("prop.json: ") and "\n" not in str(exc)
        return
    # whatever the validator lets through, the store's converters and the scorer take without error
    rescored = rescore_result(result, "corrected")
    json.dumps(rescored, allow_nan=False, ensure_ascii=False).encode("utf-8")  # as write_result_file writes it
    steps_table("run", result["per_step"], "prop.json")
    run_row(rescored, "run", path="prop.json", file_size=None, file_mtime=None, imported_at=None)
