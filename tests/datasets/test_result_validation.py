"""One validator for result files (issue 9, defects 9, 10, 13): rescore, `stored:`, import and resume
agree on what is valid, and every message names the file, the row (task_id/step_idx) and the field."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading

import pytest

from lab.engines import create_engine
from lab.errors import EngineLoadError, LabError
from lab.store import import_path, open_store
from tests.paths import EXCERPT, GOLDEN, REPO
from tests.helpers_store import make_results_dir

ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
CORRECTED = [r for r in ROWS if r["scoring_version"] == "corrected_303"]


def result_text(rows: list[dict]) -> str:
    return json.dumps({"model": "m", "model_short": "m", "eval_path": "golden", "timestamp": "2026-06-12T00:00:00",
                       "aggregate": {}, "per_step": rows})


def with_row(index: int, **changes) -> list[dict]:
    rows = [dict(r) for r in CORRECTED]
    rows[index].update(changes)
    return rows


# (case id, file text, words the message must contain: the row label and the field)
ROW = f"{CORRECTED[2]['task_id']}/{CORRECTED[2]['step_idx']}"
BAD_FILES = [
    ("nan", result_text(with_row(2, command_f1=float("nan"))), [ROW, "command_f1", "finite"]),
    ("infinity", result_text(with_row(2, command_precision=float("inf"))), [ROW, "command_precision", "finite"]),
    ("nan-in-extra", result_text(with_row(2, latency_s=float("-inf"))), [ROW, "latency_s"]),
    ("nan-in-aggregate", result_text(CORRECTED).replace('"aggregate": {}', '"aggregate": {"avg_command_f1": NaN}'),
     ["aggregate.avg_command_f1", "finite"]),
    ("f1-below-0", result_text(with_row(2, command_f1=-5.0)), [ROW, "command_f1", "greater than or equal to 0"]),
    ("exact-above-1", result_text(with_row(2, first_cmd_exact=3.0)), [ROW, "first_cmd_exact", "less than or equal to 1"]),
    ("latency-negative", result_text(with_row(2, latency_s=-1.0)), [ROW, "latency_s"]),
    ("step-idx-text", result_text(with_row(2, step_idx="abc")), ["per_step[2]", "step_idx", "integer"]),
    ("step-idx-huge", result_text(with_row(2, step_idx=2**40)), ["per_step[2]", "step_idx", "100000"]),
    ("step-idx-negative", result_text(with_row(2, step_idx=-1)), ["per_step[2]", "step_idx"]),
    ("duplicate-row", result_text(CORRECTED + [dict(CORRECTED[2])]),
     [ROW, f"per_step[{len(CORRECTED)}]", "duplicate", "first at per_step[2]"]),
    ("units-of-numbers", result_text(with_row(2, pred_command_units=["ls", 3])), [ROW, "pred_command_units[1]"]),
]
IDS = [case[0] for case in BAD_FILES]


@pytest.fixture()
def bad_file(tmp_path, request):
    name, text, words = request.param
    path = tmp_path / f"bad-{name}.json"
    path.write_text(text)
    return path, words


def run_lab(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, **kwargs)


@pytest.mark.parametrize("bad_file", BAD_FILES, ids=IDS, indirect=True)
def test_rescore_refuses_with_file_row_and_field(bad_file, tmp_path):
    path, words = bad_file
    out = tmp_path / "out.json"
    proc = run_lab("rescore", str(path), "-o", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    for word in [str(path), *words]:
        assert word in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("bad_file", BAD_FILES, ids=IDS, indirect=True)
def test_stored_engine_refuses_with_the_same_message(bad_file):
    path, words = bad_file
    engine = create_engine(f"stored:{path}")
    with pytest.raises(EngineLoadError) as err:
        engine.load()
    for word in [str(path), *words]:
        assert word in str(err.value)


@pytest.mark.parametrize("bad_file", BAD_FILES, ids=IDS, indirect=True)
def test_import_refuses_with_the_same_message_and_no_nan_reaches_duckdb(bad_file, tmp_path):
    path, words = bad_file
    with open_store(tmp_path / "lab.duckdb", make_results_dir(tmp_path)) as store:
        report = import_path(store, path)
        assert report.added == [] and len(report.failed) == 1
        name, why = report.failed[0]
        for word in [str(path), *words]:
            assert word in why
        assert "TransactionException" not in why
        assert store.scalar("SELECT count(*) FROM steps") == 0
        assert store.scalar("SELECT count(*) FROM runs") == 0


def test_import_of_many_files_keeps_the_good_ones_and_never_stores_nan(tmp_path):
    folder = tmp_path / "incoming"
    folder.mkdir()
    (folder / "good.json").write_text(result_text(CORRECTED))
    for name, text, _ in BAD_FILES:
        (folder / f"bad-{name}.json").write_text(text)
    with open_store(tmp_path / "lab.duckdb", make_results_dir(tmp_path)) as store:
        report = import_path(store, folder)
        assert [p.rsplit("/", 1)[-1] for p in report.added] == ["good.json"]
        assert len(report.failed) == len(BAD_FILES)
        assert store.scalar("SELECT count(*) FROM steps") == len(CORRECTED)
        assert store.scalar("SELECT count(*) FROM steps WHERE isnan(command_f1) OR isinf(command_f1)") == 0


def test_a_bom_at_the_start_is_accepted_everywhere(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + result_text(CORRECTED).encode("utf-8"))
    proc = run_lab("rescore", str(path), "-o", str(tmp_path / "out.json"), "--scorer", "corrected")
    assert proc.returncode == 0, proc.stderr
    assert [r["command_f1"] for r in json.loads((tmp_path / "out.json").read_text())["per_step"]] == \
        [r["command_f1"] for r in CORRECTED]
    engine = create_engine(f"stored:{path}")
    engine.load()
    assert len(engine.rows) == len(CORRECTED)
    with open_store(tmp_path / "lab.duckdb", make_results_dir(tmp_path)) as store:
        report = import_path(store, path)
        assert report.ok and store.scalar("SELECT count(*) FROM steps") == len(CORRECTED)


def test_result_files_follow_the_umask(tmp_path):
    src = tmp_path / "in.json"
    src.write_text(result_text(CORRECTED))
    out, runs = tmp_path / "out.json", tmp_path / "runs"
    umask = lambda: os.umask(0o022)  # noqa: E731 - the usual user umask, whatever the test runner's is
    assert run_lab("rescore", str(src), "-o", str(out), preexec_fn=umask).returncode == 0
    proc = run_lab("replay", "--replay", str(EXCERPT), "--engine", "reference", "--out", str(runs), "--name", "r",
                   preexec_fn=umask)
    assert proc.returncode == 0, proc.stderr
    for path in (out, runs / "r.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_replay_never_writes_a_step_idx_the_store_rejects(tmp_path):
    record = json.loads(EXCERPT.read_text(encoding="utf-8").splitlines()[0])
    record["step_idx"] = 2**70
    replay = tmp_path / "huge.jsonl"
    replay.write_text(json.dumps(record) + "\n")
    out = tmp_path / "runs"
    proc = run_lab("replay", "--replay", str(replay), "--engine", "reference", "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{replay}:1" in proc.stderr and "step_idx" in proc.stderr
    assert not list(out.glob("*.json")) if out.exists() else True


def test_replay_refuses_duplicate_steps_in_its_input(tmp_path):
    line = EXCERPT.read_text(encoding="utf-8").splitlines()[0]
    replay = tmp_path / "dup.jsonl"
    replay.write_text(line + "\n" + line + "\n")
    proc = run_lab("replay", "--replay", str(replay), "--engine", "reference", "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2 and f"{replay}:2" in proc.stderr and "duplicate" in proc.stderr


def test_resume_validates_checkpoint_rows_with_the_same_rules(tmp_path):
    from lab.data import load_replay
    from lab.runs.replay import ReplayConfig, replay

    steps = load_replay(EXCERPT).steps
    engine = create_engine("reference")
    engine.load()
    stop = threading.Event()
    config = ReplayConfig(out_dir=tmp_path, chunk_size=4, run_name="r")
    with pytest.raises(InterruptedError):
        replay(engine, steps, config, progress=lambda done, total, agg: done and stop.set(), stop=stop)
    partial = tmp_path / "r.partial.jsonl"
    lines = partial.read_text().splitlines()
    entry = json.loads(lines[1])
    entry["row"]["command_f1"] = float("nan")
    partial.write_text("\n".join([lines[0], json.dumps(entry), *lines[2:]]) + "\n")
    config.resume = True
    with pytest.raises(LabError) as err:
        replay(engine, steps, config)
    row = entry["row"]
    for word in (str(partial), f"{row['task_id']}/{row['step_idx']}", "command_f1", "finite"):
        assert word in str(err.value)
    assert not (tmp_path / "r.json").exists()
