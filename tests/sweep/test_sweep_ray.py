"""`python -m lab sweep` on a real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster):
files equal single-process `replay`, shards merge to the unsharded file, a lost node loses nothing,
and no worker opens the store."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from tests.helpers_runs import untimed_steps
from tests.paths import EXCERPT, REPO

ROOT = REPO
NODE = {"num_cpus": 2, "object_store_memory": 80 * 1024 * 1024}

from ray.cluster_utils import Cluster  # noqa: E402  (requirements-test.txt installs Ray: missing, it fails)


def no_ray_left() -> list[str]:
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "raylet" in cmd or "gcs_server" in cmd:
            left.append(cmd)
    return left


def servers_of(model: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if " serve " in cmd and str(model) in cmd:
            found.append(cmd)
    return found


@contextmanager
def ray_cluster(node: dict):
    """A real Ray cluster on this machine: a head that runs nothing (num_cpus=0, no dashboard) and one
    worker node; on exit it is shut down and no raylet or GCS process may be left."""
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                         "object_store_memory": node["object_store_memory"]})
    try:
        made.add_node(**node)
        made.wait_for_nodes()
        yield made
    finally:
        made.shutdown()
        deadline = time.time() + 30
        while no_ray_left() and time.time() < deadline:
            time.sleep(0.5)
    assert not no_ray_left(), "the cluster left Ray processes running"


@pytest.fixture(scope="module")
def module_cluster():
    """One cluster for this module's tests (a cluster's start and shutdown cost a loaded CI machine tens of
    seconds each). Each test finds it with one worker node, adds nodes and may remove one, and leaves one
    worker node behind (a lost node's test leaves its replacement)."""
    with ray_cluster(NODE) as made:
        yield made


@pytest.fixture()
def cluster(module_cluster):
    """The module's cluster as a test expects it: the head and exactly one live worker node; nodes the
    test adds beyond that are removed when it ends."""
    cluster = module_cluster
    cluster.wait_for_nodes()
    assert len(cluster.worker_nodes) == 1, "the previous test left the cluster with other than one worker"
    before = set(cluster.worker_nodes)
    yield cluster
    added = [node for node in cluster.worker_nodes if node not in before]
    for node in added[: len(cluster.worker_nodes) - 1]:  # one worker stays (the lost node's replacement)
        cluster.remove_node(node)
    cluster.wait_for_nodes()


@pytest.fixture(scope="module")
def served_single(tiny_model_dir, tmp_path_factory) -> tuple[list[str], Path]:
    """Single-process `replay` of the served engine that the lost-node and killed-driver tests sweep (the
    same arguments in both, so run once): (the sweep's arguments, the folder of ts.json)."""
    spec = f"transformers-serve:{tiny_model_dir}?device=cpu&max_tokens=24&name=ts"
    common = ["--replay", str(EXCERPT), "--limit", "5", "--chunk-size", "1", "--engine", spec]
    root = tmp_path_factory.mktemp("served-single")
    lab(["replay", *common, "--out", str(root / "single")], root)
    return common, root / "single"


def env_for(tmp_path: Path) -> dict:
    return {**os.environ, "LAB_LOG_DIR": str(tmp_path / "logs"), "HF_HUB_OFFLINE": "1", "LAB_CACHE_DIR": str(tmp_path),
            "LAB_RESULTS_DIR": str(tmp_path / "results"), "LAB_DB": str(tmp_path / "store.duckdb"),
            "TOKENIZERS_PARALLELISM": "false"}


def lab(args: list[str], tmp_path: Path, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, env={**env_for(tmp_path), **kw.pop("env", {})},
                          capture_output=True, text=True, timeout=480, **kw)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def same_run(a: Path, b: Path) -> None:
    """Per-step content byte-identical timings aside; the same aggregate."""
    one, two = json.loads(a.read_text()), json.loads(b.read_text())
    assert untimed_steps(one["per_step"]) == untimed_steps(two["per_step"]), f"{a.name}: per-step content differs"
    assert one["aggregate"] == two["aggregate"]
    assert {k for k in one if one[k] != two[k]} <= {"per_step", "timestamp", "gen_time_sec", "avg_sec_per_step",
                                                    "load_time_sec", "sampling"}
    local = {"server_argv", "base_url"}  # the managed server's own port on its node
    assert {k: v for k, v in one["sampling"].items() if k not in local} == \
        {k: v for k, v in two["sampling"].items() if k not in local}


# The excerpt's first three steps: 2.0k, 3.4k and 4.6k tokens in the tiny tokenizer (its 4th and 5th are 10.1k
# and 12.5k; the attention of a prompt grows with its square: five steps cost eight times three)
STEPS = 3


def test_sweep_on_two_nodes_equals_replay_and_shards_merge(cluster, tiny_model_dir, tmp_path):
    cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    lab(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--limit", str(STEPS),
         "--out", str(tmp_path / "seed")], tmp_path)
    stored = tmp_path / "seed" / "reference.json"
    served = f"transformers-serve:{tiny_model_dir}?device=cpu&max_tokens=6"
    specs = ["reference", f"stored:{stored}?name=st", f"{served}&name=ts1", f"{served}&name=ts2&temperature=0"]
    common = ["--replay", str(EXCERPT), "--limit", str(STEPS), "--chunk-size", "2"]
    single = tmp_path / "single"
    lab(["replay", *common, "--out", str(single), *[a for s in specs for a in ("--engine", s)]], tmp_path)
    audit = tmp_path / "audit.json"
    out = tmp_path / "sweep"
    lab(["sweep", *common, "--ray", cluster.address, "--out", str(out), *[a for s in specs for a in ("--engine", s)]],
        tmp_path, env={"LAB_SWEEP_AUDIT": str(audit)})
    for name in ("reference", "st", "ts1", "ts2"):
        same_run(single / f"{name}.json", out / f"{name}.json")
    assert not list(out.glob("*.partial.jsonl"))
    opened = json.loads(audit.read_text())
    assert set(opened) == set(specs) and all(opened.values())  # the hook saw the workers' opens
    assert not [p for paths in opened.values() for p in paths if p.endswith(".duckdb") or "store.duckdb" in p]

    sharded = tmp_path / "sharded"
    lab(["sweep", *common, "--ray", cluster.address, "--shards", "2", "--out", str(sharded),
         "--engine", f"{served}&name=ts1"], tmp_path)
    same_run(single / "ts1.json", sharded / "ts1.json")
    shards = [json.loads((sharded / f"ts1-shard{i:02d}.json").read_text()) for i in range(2)]
    assert [(s["num_shards"], s["shard_index"], s["total_input_steps"]) for s in shards] == \
        [(2, i, STEPS) for i in range(2)]
    assert [r["step_idx"] for s in shards for r in s["per_step"]] == \
        [r["step_idx"] for r in json.loads((single / "ts1.json").read_text())["per_step"]]

    # the reference answers' likelihood swept like replay (two shards, one a node): `score-reference`'s file
    inproc = ["--replay", str(EXCERPT), "--limit", str(STEPS), "--engine", f"transformers:{tiny_model_dir}?device=cpu&name=tf"]
    lab(["score-reference", *inproc, "--out", str(single)], tmp_path)
    done = lab(["sweep", *inproc, "--what", "reference", "--shards", "2", "--ray", cluster.address,
                "--out", str(sharded)], tmp_path)
    local, swept = (json.loads((d / "tf.reference.json").read_text()) for d in (single, sharded))
    assert swept["kind"] == local["kind"] == "tb2lite-reference-likelihood"
    assert swept["per_step"] == local["per_step"] and swept["aggregate"] == local["aggregate"]
    assert {k for k in local if local[k] != swept.get(k)} == {"timestamp"}
    assert f"NLL per token {local['aggregate']['ref_nll_per_token']:.4f}" in done.stdout
    halves = [json.loads((sharded / f"tf.reference-shard{i:02d}.json").read_text()) for i in range(2)]
    assert [(h["num_shards"], h["shard_index"], len(h["per_step"])) for h in halves] == [(2, 0, 2), (2, 1, 1)]
    assert not list(sharded.glob("*.partial.jsonl"))


def test_a_lost_node_loses_nothing(cluster, served_single, tiny_model_dir, tmp_path):
    common, single = served_single
    out = tmp_path / "sweep"
    (first,) = cluster.worker_nodes  # the only worker node: it runs the engine
    proc = subprocess.Popen([sys.executable, "-m", "lab", "sweep", *common, "--ray", cluster.address, "--out", str(out)],
                            cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        checkpoint = out / "ts.partial.jsonl"
        deadline = time.time() + 240
        while time.time() < deadline:  # the first step back: four are still to answer when its node dies
            if checkpoint.is_file() and checkpoint.read_text().count('"row"') >= 1:
                break
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail("no step came back to the driver")
        # the node running the engine and its server dies at once (adding its replacement first gave a fast
        # machine the seconds to answer the last four steps before the loss); the re-placed actor waits for
        # the node added after it
        cluster.remove_node(first)
        cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-3000:]
    assert "re-placing" in stderr
    rows = json.loads((out / "ts.json").read_text())["per_step"]
    keys = [(r["task_id"], r["step_idx"]) for r in rows]
    assert len(keys) == len(set(keys)) == 5
    same_run(single / "ts.json", out / "ts.json")
    deadline = time.time() + 30
    while servers_of(tiny_model_dir) and time.time() < deadline:
        time.sleep(0.5)
    assert not servers_of(tiny_model_dir), "a lost node's server was left running"


def test_a_killed_driver_resumes_with_resume(cluster, served_single, tiny_model_dir, tmp_path):
    common, single = served_single
    out = tmp_path / "sweep"
    args = [sys.executable, "-m", "lab", "sweep", *common, "--ray", cluster.address, "--out", str(out)]
    proc = subprocess.Popen(args, cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out / "ts.partial.jsonl"
    try:
        deadline = time.time() + 240
        while not (checkpoint.is_file() and checkpoint.read_text().count('"row"') >= 2):
            assert time.time() < deadline and proc.poll() is None, "no step came back to the driver"
            time.sleep(0.2)
    finally:
        proc.kill()  # SIGKILL: no cleanup on the driver
        proc.wait()
    kept = checkpoint.read_text().count('"row"')
    assert 2 <= kept < 5
    lab(["sweep", *common, "--ray", cluster.address, "--out", str(out), "--resume"], tmp_path)
    same_run(single / "ts.json", out / "ts.json")
    assert not checkpoint.exists()
    deadline = time.time() + 30
    while servers_of(tiny_model_dir) and time.time() < deadline:
        time.sleep(0.5)
    assert not servers_of(tiny_model_dir), "the killed driver's server was left running"


def test_a_vllm_engine_sweeps_on_a_node_like_replay(cluster, vllm_exe, tmp_path):
    """A managed `vllm serve` (vLLM's CPU build, LAB_VLLM) started by the sweep's actor on its node writes the
    same file as `python -m lab replay` of the same engine, and no vLLM process outlives it. The engine is one
    of the presets' own architectures (LFM2-MoE, tests/engines/helpers_presets.py) with `?preset=KEY`."""
    from tests.engines.helpers_presets import save_lfm2moe
    from tests.engines.test_vllm_cpu import vllm_processes

    folder = save_lfm2moe(tmp_path / "ckpts" / "checkpoint-100", positions=16384)
    # one request at a time: with the lab's default concurrency the two runs once differed in a step's content
    # (LFM2-MoE on vLLM's CPU build; which requests share a batch depends on when they arrive)
    spec = (f"vllm:{folder}?preset=lfm25-8b-a1b-sft&dtype=float32&max_model_len=16384&enforce_eager=true"
            "&max_tokens=8&kv_cache_gb=0.5&concurrency=1&name=vl")
    common = ["--replay", str(EXCERPT), "--limit", "3", "--engine", spec, "--engine", "reference"]
    env = {"LAB_VLLM": vllm_exe, "LAB_VLLM_DEVICE": "cpu", "VLLM_NO_USAGE_STATS": "1"}  # caches: vllm_exe's
    lab(["replay", *common, "--out", str(tmp_path / "single")], tmp_path, env=env)
    with pytest.MonkeyPatch.context() as mp:  # a node's workers inherit the environment the node starts in
        for key, value in env.items():
            mp.setenv(key, value)
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    lab(["sweep", *common, "--ray", cluster.address, "--out", str(tmp_path / "sweep")], tmp_path, env=env)
    for name in ("vl", "reference"):
        same_run(tmp_path / "single" / f"{name}.json", tmp_path / "sweep" / f"{name}.json")
    swept = json.loads((tmp_path / "sweep" / "vl.json").read_text())
    assert swept["sampling"]["max_model_len"] == 16384 and all(r["token_ids_preview"] for r in swept["per_step"])
    assert swept["sampling"]["preset"] == "lfm25-8b-a1b-sft" and all(r["error"] is None for r in swept["per_step"])
    deadline = time.time() + 30
    while (servers_of(folder) or vllm_processes(str(folder))) and time.time() < deadline:
        time.sleep(0.5)
    assert not servers_of(folder) and not vllm_processes(str(folder)), \
        "the sweep left vLLM processes running"
