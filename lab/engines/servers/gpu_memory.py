"""GPU memory held by given processes, read through NVML (`nvidia-ml-py`), never through CUDA.

The lab's own process never creates a CUDA context: NVML only reads the driver's process
table. Without NVML (no `nvidia-ml-py`, no driver, a CPU machine) every answer is None.
"""
from __future__ import annotations

import threading
from typing import Iterable

_lock = threading.Lock()
_state: dict = {"ready": None}


def _nvml():
    """The initialised pynvml module, or None where NVML is unavailable (checked once)."""
    with _lock:
        if _state["ready"] is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                _state["ready"], _state["module"] = True, pynvml
            except Exception:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, driver errors
                _state["ready"] = False
        return _state.get("module") if _state["ready"] else None


def gpu_memory_by_pid() -> dict[int, int] | None:
    """PID -> bytes of GPU memory it holds, summed over all GPUs; None without NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    used: dict[int, int] = {}
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            for getter in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
                try:
                    processes = getter(handle)
                except nvml.NVMLError:
                    continue
                for proc in processes:
                    if proc.usedGpuMemory is not None:
                        used[int(proc.pid)] = used.get(int(proc.pid), 0) + int(proc.usedGpuMemory)
    except nvml.NVMLError:
        return None
    return used


def gpu_memory_gb(pids: Iterable[int]) -> float | None:
    """GiB of GPU memory held by these processes together; None without NVML or without pids."""
    pids = list(pids)
    if not pids:
        return None
    table = gpu_memory_by_pid()
    if table is None:
        return None
    return round(sum(table.get(pid, 0) for pid in pids) / 2**30, 3)


def gpu_count() -> int:
    """GPUs NVML sees (0 without NVML: a CPU machine, where vLLM runs its CPU backend)."""
    nvml = _nvml()
    if nvml is None:
        return 0
    try:
        return int(nvml.nvmlDeviceGetCount())
    except nvml.NVMLError:
        return 0
