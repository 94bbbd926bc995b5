"""What a sweep engine asks Ray for: GPUs = tensor x pipeline parallel size of its preset, else one CPU
(also for vLLM when the sweep runs vLLM's CPU backend: LAB_VLLM_DEVICE=cpu or `device=cpu`)."""
from __future__ import annotations


from lab.errors import LabError
from lab.settings import env


def needs(spec: str) -> dict:
    """Ray resources of one engine, read from its preset/spec without loading it."""
    from lab.engines import create_engine

    engine = create_engine(spec)
    settings = engine.settings
    on_cpu = (env("LAB_VLLM_DEVICE") or "").strip().lower() == "cpu"
    if not engine.holds_memory_share or on_cpu or str(settings.get("device", "")).lower() == "cpu":
        return {"num_cpus": 1, "num_gpus": 0}
    gpus = int(settings.get("tensor_parallel_size") or 1) * int(settings.get("pipeline_parallel_size") or 1)
    if str(engine.extra.get("distributed_executor_backend", "")).lower() == "ray":
        # vLLM's Ray backend places its own GPU workers on the sweep's cluster; the lab's actor only supervises
        return {"num_cpus": 1, "num_gpus": 0, "cluster_gpus": gpus}
    return {"num_cpus": 1, "num_gpus": gpus}


def check_fits(spec: str, want: dict, nodes: list[dict]) -> None:
    """Refuse, by name, an engine no node (nor the whole cluster, with vLLM's Ray backend) can hold."""
    gpus = want.get("cluster_gpus") or want["num_gpus"]
    if not gpus:
        return
    per_node = max((n.get("Resources", {}).get("GPU", 0) for n in nodes if n.get("Alive")), default=0)
    total = sum(n.get("Resources", {}).get("GPU", 0) for n in nodes if n.get("Alive"))
    if gpus > total:
        cpu_hint = "; to run vLLM's CPU backend on CPU nodes, set LAB_VLLM_DEVICE=cpu" if not total else ""
        raise LabError(f"{spec}: needs {gpus} GPUs (tensor x pipeline parallel) but the Ray cluster has "
                       f"{int(total)}{cpu_hint}")
    if gpus > per_node and not want.get("cluster_gpus"):
        raise LabError(f"{spec}: needs {gpus} GPUs, more than one node's {int(per_node)}; start it with "
                       "distributed_executor_backend=ray in its SPEC or preset (vLLM's multi-node mode, see docs/sweep.md)")
