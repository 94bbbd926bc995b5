"""Engines (DESIGN §4): one file per kind, a registry of SPEC strings, presets and a pool."""
from lab.engines.base import Completion, Engine, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig
from lab.engines.pool import EnginePool
from lab.engines.presets import Preset, load_presets
from lab.engines.registry import create_engine, engine_kinds, engine_options, resolve_spec

__all__ = [
    "Completion",
    "Engine",
    "EngineBase",
    "EngineConfig",
    "EngineInfo",
    "EnginePool",
    "Preset",
    "Request",
    "Sampling",
    "create_engine",
    "engine_kinds",
    "engine_options",
    "load_presets",
    "resolve_spec",
]
