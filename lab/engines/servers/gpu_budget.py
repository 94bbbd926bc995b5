"""Share one GPU's memory among vLLM engines: `gpu_memory_utilization` per engine.

vLLM refuses to start when the share it asks for is not free, and it profiles memory over the
whole GPU, so engines on one GPU must ask for shares that add up to at most the budget
(assets/servers.yaml `gpu_memory_budget`). An engine with its own share (preset or SPEC) keeps
it; the others split what is left equally. Pure functions: testable without a GPU.

vLLM's CPU backend has the same problem in RAM: each server's KV cache is `VLLM_CPU_KVCACHE_SPACE`
GiB, so CPU engines split `cpu_kv_cache_budget_gb` the same way (`Budget` says which).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from lab.errors import EngineSpecError


@dataclass(frozen=True)
class GpuRequest:
    """One vLLM engine asking for memory: its name, GPU index and its own share (None: auto)."""

    name: str
    gpu: int
    fraction: float | None = None


class GpuBudgetError(EngineSpecError):
    """The requested vLLM engines cannot all fit on their GPU (or in the CPU KV-cache budget)."""


@dataclass(frozen=True)
class Budget:
    """What is shared and how a refusal names it: a GPU's memory fraction or CPU RAM in GiB."""

    total: float = 0.92
    minimum: float = 0.05
    device: str = "GPU {gpu}"
    what: str = "of its memory"
    hint: str = ("Unload an engine, give smaller shares with ?gpu_memory_utilization=0.3, "
                 "or place an engine on another GPU with ?gpu=N")
    step: float = 0.001  # shares are rounded down to this


CPU_KV_BUDGET_HINT = "Unload an engine or give smaller KV caches with ?kv_cache_gb=1"


def split_budget(
    requests: list[GpuRequest],
    held: dict[int, list[tuple[str, float]]] | None = None,
    budget: float = 0.92,
    minimum: float = 0.05,
    kind: Budget | None = None,
) -> dict[str, float]:
    """Engine name -> `gpu_memory_utilization` for each request.

    `held` lists, per GPU, the (engine, share) of vLLM engines already running there. Raises
    GpuBudgetError naming the GPU, who holds what and what to do when they cannot fit."""
    held = held or {}
    kind = kind or Budget(total=budget, minimum=minimum)
    budget, minimum = kind.total, kind.minimum
    shares: dict[str, float] = {}
    for gpu in sorted({r.gpu for r in requests}):
        on_gpu = [r for r in requests if r.gpu == gpu]
        holders = list(held.get(gpu, []))
        fixed = [(r.name, float(r.fraction)) for r in on_gpu if r.fraction is not None]
        auto = [r for r in on_gpu if r.fraction is None]
        taken = sum(f for _, f in holders) + sum(f for _, f in fixed)
        left = round(budget - taken, 4)
        who = ", ".join(f"'{n}' {f:g}" for n, f in holders + fixed) or "nobody"
        if left < -1e-9 or (auto and left / len(auto) < minimum):
            wanted = f"{len(auto)} more engine(s) need at least {minimum:g} each" if auto else f"the shares add up to {taken:g}"
            raise GpuBudgetError(
                f"{kind.device.format(gpu=gpu)}: vLLM engines cannot fit in the lab's budget of {budget:g} {kind.what} "
                f"(held or asked: {who}; {wanted}). {kind.hint}"
            )
        shares.update(dict(fixed))
        for r in auto:
            shares[r.name] = math.floor(left / len(auto) / kind.step) * kind.step  # never above the budget
            shares[r.name] = round(shares[r.name], 6)
    return shares
