"""A sweep's plan without Ray: SPEC patterns expand, shards split evenly, GPU needs are read from the SPEC
and an engine the cluster cannot hold is refused by name."""
from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.sweep.placement import check_fits, needs
from lab.sweep.shards import split
from lab.sweep.specs import expand_specs

NODES = [{"Alive": True, "Resources": {"GPU": 4}}, {"Alive": True, "Resources": {"GPU": 4}}]


def test_spec_patterns_expand(tmp_path):
    for step in (100, 200, 300):
        (tmp_path / f"checkpoint-{step}").mkdir()
    listed = tmp_path / "specs.txt"
    listed.write_text("# a series\nreference\n\nvllm:/m/ckpt-{1..3}?name=c\n")
    got = expand_specs([f"vllm:{tmp_path}/checkpoint-*?max_tokens=8", "vllm:/x/step-{100..500..200}", f"@{listed}"])
    assert got == [f"vllm:{tmp_path}/checkpoint-{s}?max_tokens=8" for s in (100, 200, 300)] + \
        ["vllm:/x/step-100", "vllm:/x/step-300", "vllm:/x/step-500", "reference"] + \
        [f"vllm:/m/ckpt-{i}?name=c" for i in (1, 2, 3)]
    with pytest.raises(LabError, match="matches nothing"):
        expand_specs([f"stored:{tmp_path}/nothing-*.json"])


def test_spec_patterns_that_would_blow_up_are_refused_by_name(tmp_path):
    """A range of a billion checkpoints, ranges that multiply past the limit, a 5,000-digit number, an
    @FILE naming itself: one LabError each, before anything is built (no MemoryError, no RecursionError)."""
    with pytest.raises(LabError, match=r"expands to 1,000,000,000 engines, over the sweep's limit of 1,000"):
        expand_specs(["vllm:/ckpt-{1..1000000000}"])
    with pytest.raises(LabError, match="expands to 1,600 engines"):
        expand_specs(["vllm:/run-{1..40}/ckpt-{1..40}"])
    assert len(expand_specs(["vllm:/run-{1..10}/ckpt-{1..10}"])) == 100
    with pytest.raises(LabError, match="at most 18 digits"):
        expand_specs(["vllm:/ckpt-{1..%s}" % ("9" * 5000)])
    loop = tmp_path / "loop.txt"
    loop.write_text(f"reference\n@{loop}\n")
    with pytest.raises(LabError, match="names itself"):
        expand_specs([f"@{loop}"])
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LabError, match="cannot read this SPEC file"):
        expand_specs([f"@{binary}"])
    many = tmp_path / "many.txt"
    many.write_text("vllm:/a-{1..600}\nvllm:/b-{1..600}\n")  # each fits, together they do not
    with pytest.raises(LabError, match="over the sweep's limit"):
        expand_specs([f"@{many}"])


def test_the_owners_sweep_limits_file_is_read_or_named(tmp_path, monkeypatch):
    from lab.sweep import specs

    own = tmp_path / "limits.yaml"
    own.write_text("max_engines: 2\nmax_file_depth: 8\n")
    monkeypatch.setenv("LAB_SWEEP_LIMITS", str(own))
    specs.limits.cache_clear()
    try:
        with pytest.raises(LabError, match="over the sweep's limit of 2"):
            expand_specs(["vllm:/c-{1..3}"])
        monkeypatch.setenv("LAB_SWEEP_LIMITS", str(tmp_path / "missing.yaml"))
        specs.limits.cache_clear()
        with pytest.raises(LabError, match=r"LAB_SWEEP_LIMITS=.*missing.yaml: cannot read the sweep limits"):
            expand_specs(["reference"])
    finally:
        monkeypatch.delenv("LAB_SWEEP_LIMITS")
        specs.limits.cache_clear()


def test_shards_split_evenly_and_cover_every_step():
    pieces = split(8, 3)
    assert [len(p) for p in pieces] == [3, 3, 2] and [i for p in pieces for i in p] == list(range(8))
    assert len(split(2, 5)) == 2
    assert [list(p) for p in split(3, 10**12)] == [[0], [1], [2]]  # at once: a shard per step at most


def test_gpu_needs_and_refusals(monkeypatch):
    monkeypatch.delenv("LAB_VLLM_DEVICE", raising=False)
    assert needs("reference") == {"num_cpus": 1, "num_gpus": 0}
    assert needs("vllm:/m?tensor_parallel_size=2&pipeline_parallel_size=2")["num_gpus"] == 4
    check_fits("vllm:/m?tensor_parallel_size=4", needs("vllm:/m?tensor_parallel_size=4"), NODES)
    with pytest.raises(LabError, match="more than one node's 4.*distributed_executor_backend=ray"):
        check_fits("vllm:/m?tensor_parallel_size=8", needs("vllm:/m?tensor_parallel_size=8"), NODES)
    multi = "vllm:/m?tensor_parallel_size=8&distributed_executor_backend=ray"
    assert needs(multi)["num_gpus"] == 0  # vLLM's Ray backend places its own workers
    check_fits(multi, needs(multi), NODES)
    too_big = "vllm:/m?tensor_parallel_size=16&distributed_executor_backend=ray"
    with pytest.raises(LabError, match="needs 16 GPUs.*has 8"):
        check_fits(too_big, needs(too_big), NODES)


def test_vllm_on_cpu_nodes_asks_for_a_cpu(monkeypatch):
    monkeypatch.delenv("LAB_VLLM_DEVICE", raising=False)
    cpu_only = [{"Alive": True, "Resources": {"CPU": 2.0}}]
    with pytest.raises(LabError, match="has 0; to run vLLM's CPU backend on CPU nodes, set LAB_VLLM_DEVICE=cpu"):
        check_fits("vllm:/m", needs("vllm:/m"), cpu_only)
    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    assert needs("vllm:/m") == {"num_cpus": 1, "num_gpus": 0}
    check_fits("vllm:/m", needs("vllm:/m"), cpu_only)


def test_relative_stored_paths_become_absolute(tmp_path, monkeypatch):
    """A worker's working folder is not the driver's: a relative `stored:` file that exists is anchored."""
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "a.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert expand_specs(["stored:runs/a.json?name=x", "stored:runs/none.json", "reference"]) == \
        [f"stored:{tmp_path}/runs/a.json?name=x", "stored:runs/none.json", "reference"]


def test_addresses_and_the_dashboard_link():
    """Where the driver connects, and the dashboard link it shows (Ray's context gives HOST:PORT or '')."""
    from types import SimpleNamespace

    from lab.sweep.connect import dashboard_url, head_endpoint

    assert head_endpoint("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert head_endpoint("ray://head.internal") == ("head.internal", 10001)
    assert head_endpoint("local") is None and head_endpoint("auto") is None
    for bad in ("http://x:1", "10.0.0.5:port", ":6379"):
        with pytest.raises(LabError, match="expected HEAD:PORT"):
            head_endpoint(bad)
    from lab.sweep.connect import check_reachable

    with pytest.raises(LabError, match=r"cannot reach the Ray cluster at a{200} \(UnicodeError\)"):
        check_reachable("a" * 5000)  # a host name IDNA cannot encode was a UnicodeError traceback
    assert dashboard_url(SimpleNamespace(dashboard_url="10.0.0.5:8265")) == "http://10.0.0.5:8265"
    assert dashboard_url(SimpleNamespace(dashboard_url="")) is None
