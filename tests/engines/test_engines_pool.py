"""EnginePool: background loading, failure isolation, concurrent generation, public mode."""
from __future__ import annotations

import json
import threading

import pytest

from lab.data import load_replay
from lab.engines import EnginePool, Request, Sampling
from lab.errors import EngineSpecError


@pytest.fixture(scope="module")
def steps(shared_dir):
    return load_replay(shared_dir / "replay_excerpt.jsonl", mode="corrected").steps[:4]


@pytest.fixture
def stored_file(tmp_path, steps):
    rows = [{"task_id": s.task_id, "step_idx": s.step_idx, "pred_preview": f"stored answer {i}", "pred_command_units": [f"echo {i}"]}
            for i, s in enumerate(steps[:3])]
    path = tmp_path / "results" / "run.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"model": "m", "model_short": "run", "per_step": rows}))
    return path


def test_pool_loads_in_background_and_isolates_failures(tmp_path, tiny_model_dir, stored_file, steps):
    pool = EnginePool()
    names = [
        pool.add("reference"),
        pool.add(f"stored:{stored_file}"),
        pool.add(f"transformers:{tiny_model_dir}?device=cpu", name="tiny"),
        pool.add(f"transformers:{tmp_path / 'missing-model'}", name="broken"),
        pool.add("reference"),
    ]
    assert names == ["reference", "run", "tiny", "broken", "reference · reference"]
    assert pool.wait(timeout=120)
    status = {row["name"]: row for row in pool.status()}
    assert status["broken"]["state"] == "failed" and "does not exist" in status["broken"]["error"]
    assert "Traceback" not in status["broken"]["error"]
    ready = [n for n in names if n != "broken"]
    assert all(status[n]["state"] == "ready" and status[n]["error"] is None for n in ready)
    assert status["tiny"]["kind"] == "transformers" and status["tiny"]["device"] == "cpu (float32)"
    assert status["tiny"]["memory_gb"] > 0 and pool.get("run").name == "run"

    # the tiny engine crashes mid-run: its completions carry the error, the others finish
    def crash(requests, sampling, on_done=None):
        raise RuntimeError("simulated CUDA error\nwith details")

    pool.get("reference · reference").generate = crash
    lock = threading.Lock()
    done: list[tuple[str, int]] = []

    def on_done(name, index, completion):
        with lock:
            done.append((name, index))

    requests = {n: [Request(s, f"USER: {s.key}") for s in steps] for n in names}
    sampling = {"tiny": Sampling(max_tokens=3)}
    results = pool.generate_all(names, requests, sampling, on_done)
    assert set(results) == set(names)
    assert [c.text for c in results["reference"]] == [s.ref_raw for s in steps]
    assert results["run"][0].text == "stored answer 0" and results["run"][3].error.startswith("step ")
    assert all(c.error is None and len(c.token_ids) <= 3 for c in results["tiny"])
    assert all(c.error == "engine 'broken' is not ready (failed: " + status["broken"]["error"] + ")" for c in results["broken"])
    assert all(c.error == "engine 'reference · reference' failed: RuntimeError: simulated CUDA error" for c in results["reference · reference"])
    assert len(done) == len(names) * len(steps)

    pool.remove("tiny")
    assert "tiny" not in pool.names() and pool.state("tiny") == "absent"
    with pytest.raises(EngineSpecError, match="no engine named 'tiny'"):
        pool.get("tiny")
    pool.close_all()
    assert pool.status() == []


def test_engines_generate_concurrently(steps):
    """Each engine waits at a 2-party barrier inside generate: only concurrent runs get through."""
    pool = EnginePool()
    names = [pool.add("reference"), pool.add("reference")]
    assert pool.wait(timeout=30)
    barrier = threading.Barrier(2, timeout=20)
    for name in names:
        engine = pool.get(name)
        original = engine.generate

        def meet_then_generate(requests, sampling, on_done=None, _original=original):
            barrier.wait()  # raises BrokenBarrierError (-> completion errors) if run one after another
            return _original(requests, sampling, on_done)

        engine.generate = meet_then_generate
    results = pool.generate_all(names, [Request(steps[0], "p")])
    assert all(results[n][0].error is None and results[n][0].text == steps[0].ref_raw for n in names)


def test_requests_may_be_rendered_per_engine(steps):
    pool = EnginePool()
    pool.add("reference")
    pool.wait()
    seen = []
    results = pool.generate_all(["reference"], lambda engine: [Request(steps[0], engine.name)], Sampling())
    assert results["reference"][0].text == steps[0].ref_raw
    results = pool.generate_all(["reference", "ghost"], [Request(steps[0], "p")], None, lambda *a: seen.append(a[:2]))
    assert "not ready (not in the pool)" in results["ghost"][0].error and ("ghost", 0) in seen


def test_public_pool_admits_only_reference_and_stored_in_data_folders(tmp_path, stored_file):
    pool = EnginePool(allow_loading=False, data_roots=[stored_file.parent])
    pool.add("reference")
    pool.add(f"stored:{stored_file}")
    outside = tmp_path / "elsewhere.json"
    outside.write_text(stored_file.read_text())
    with pytest.raises(EngineSpecError, match="outside the data folders"):
        pool.add(f"stored:{outside}")
    with pytest.raises(EngineSpecError, match="outside the data folders"):
        pool.add(f"stored:{stored_file.parent}/../elsewhere.json")
    for spec in ("transformers:/models/x", "qwen35-2b-sft", "openai:http://127.0.0.1:1#m"):
        with pytest.raises(EngineSpecError, match="disabled on this server"):
            pool.add(spec)
    assert pool.wait(timeout=30)
    assert [row["state"] for row in pool.status()] == ["ready", "ready"]


def test_bad_spec_raises_at_add_and_adds_nothing():
    pool = EnginePool()
    with pytest.raises(EngineSpecError, match="unknown engine or preset"):
        pool.add("no-such-thing")
    assert pool.status() == []


def test_concurrent_adds_get_unique_names():
    pool = EnginePool()
    names: list[str] = []
    threads = [threading.Thread(target=lambda: names.append(pool.add("reference"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pool.wait(timeout=30)
    assert len(set(names)) == 8 and set(pool.names("ready")) == set(names)
