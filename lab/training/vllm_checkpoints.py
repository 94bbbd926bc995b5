"""A checkpoint replayed from its saved folder on a managed `vllm serve`, one server for the whole training run.

A LoRA checkpoint (a folder with adapter_config.json) is served as a LoRA module of its base model: the
first save starts `vllm serve BASE` with that adapter and `runtime_lora=true`, every later save loads its
adapter into the running server and unloads the previous one (lab.engines.servers.lora_runtime), so the
server starts once per training run. A full checkpoint has new weights for every layer: each save starts
a server on its folder (the previous one is stopped first). The server lives until training ends.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from lab.engines.registry import create_engine
from lab.engines.servers.supervisor import READY
from lab.engines.servers.vllm_server import VLLMServerEngine
from lab.errors import LabError
from lab.training.options import EvalOptions, engine_spec


def adapter_base(folder: Path, given: str | None) -> str | None:
    """The base model of the LoRA adapter in `folder` (`given` wins), or None when `folder` is no adapter."""
    config = folder / "adapter_config.json"
    if not config.is_file():
        return None
    if given:
        return checked_base(given, "base_model")
    try:
        base = json.loads(config.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError) as exc:
        raise LabError(f"{config}: cannot read the adapter's base model ({exc}); give base_model=") from None
    if not base:
        raise LabError(f"{config} names no base_model_name_or_path: give the callback base_model=")
    return checked_base(str(base), str(config))


def checked_base(base: str, where: str) -> str:
    """`base` when it can only be read as a model (a folder or Hub id): never as a `vllm serve` flag (a leading
    `-`) or as more SPEC options (`?`, `&`, `#`)."""
    if base.strip().startswith("-") or any(c in base for c in "?&#") or not base.strip():
        raise LabError(f"{where}: base model {base[:80]!r} is not a folder or Hub id; give the callback base_model=")
    return base.strip()


class CheckpointServer:
    """The `vllm serve` a training run's checkpoints are replayed on (module docstring)."""

    def __init__(self, options: EvalOptions) -> None:
        self.options = options
        self.engine: VLLMServerEngine | None = None
        self.base: str | None = None
        self.starts = 0  # servers started: one per training run for LoRA, one per save for full checkpoints

    def engine_for(self, folder: Path) -> VLLMServerEngine:
        """A loaded engine serving the checkpoint in `folder` (its `load_time_sec`: the start or the swap)."""
        if not folder.is_dir():
            raise LabError(f"checkpoint folder {folder} does not exist: vLLM replays saved checkpoints only")
        base = adapter_base(folder, self.options.base_model)
        options = self.options.spec_options()
        if base is None:
            return self._start(engine_spec("vllm", str(folder), options), None)
        spec = engine_spec("vllm", base, {**options, "lora": str(folder), "runtime_lora": "true"})
        engine = self.engine
        if engine is not None and self.base == base and engine.server is not None and engine.server.state == READY:
            start = time.perf_counter()
            engine.swap_adapter(str(folder), spec)
            engine.load_time_sec = time.perf_counter() - start
            return engine
        return self._start(spec, base)

    def _start(self, spec: str, base: str | None) -> VLLMServerEngine:
        self.close()
        engine = create_engine(spec)
        self.starts += 1
        engine.load()
        self.engine, self.base = engine, base
        return engine

    def close(self) -> None:
        """Stop the server (its whole process group)."""
        if self.engine is not None:
            self.engine.close()
        self.engine, self.base = None, None
