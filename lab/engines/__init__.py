"""Engines (DESIGN §4): one file per kind, a registry of SPEC strings, presets and a pool.

The names below load on first use (PEP 562), so importing one light module of the package
(`lab.engines.base`, `lab.engines.servers`) does not load every engine kind and its SDK."""
from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it
_EXPORTS = {
    "Completion": "lab.engines.base",
    "EngineInfo": "lab.engines.base",
    "Request": "lab.engines.base",
    "Sampling": "lab.engines.base",
    "EngineBase": "lab.engines.common",
    "EngineConfig": "lab.engines.common",
    "EnginePool": "lab.engines.pool",
    "Preset": "lab.engines.presets",
    "load_presets": "lab.engines.presets",
    "create_engine": "lab.engines.registry",
    "engine_kinds": "lab.engines.registry",
    "engine_options": "lab.engines.registry",
    "resolve_spec": "lab.engines.registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lab.engines' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
