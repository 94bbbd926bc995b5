"""`transformers-serve:MODEL_OR_PATH`: one model in its own `transformers serve` process.

The lab starts `transformers serve MODEL --host 127.0.0.1 --port N --device DEVICE` (the model
is pinned, so the server answers for it only), waits for `/health`, and sends the rendered
prompts to its `/v1/completions`. CPU or GPU (`device=cuda`, `gpu=N`). The executable is
$LAB_TRANSFORMERS, else `transformers` beside the running Python, else on PATH.
Options: `device` (auto), `dtype` (auto), any other `transformers serve` flag by name
(`?attn_implementation=sdpa` -> `--attn-implementation sdpa`).
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from lab.engines.common import EngineConfig, model_lora_name
from lab.engines.loading import check_model_source
from lab.engines.servers.flags import option_flags
from lab.engines.servers.managed import MANAGED_OPTIONS, ManagedEngine
from lab.engines.context import model_generation_config, read_context_length
from lab.engines.spec import as_number
from lab.errors import EngineSpecError
from lab.settings import env


def transformers_executable() -> str:
    """$LAB_TRANSFORMERS, else `transformers` beside sys.executable, else on PATH."""
    explicit = env("LAB_TRANSFORMERS")
    if explicit:
        return explicit
    beside = Path(sys.executable).with_name("transformers")
    return str(beside) if beside.exists() else (shutil.which("transformers") or "transformers")


def transformers_serve_argv(exe: str, model: str, port: int, *, device: str = "auto", dtype: str = "auto",
                            trust_remote_code: bool = False, extra: dict | None = None) -> list[str]:
    """The `transformers serve` command for one pinned model on 127.0.0.1:`port` (pure)."""
    argv = [exe, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--device", device,
            "--dtype", dtype, "--log-level", "info"]
    if trust_remote_code:
        argv.append("--trust-remote-code")
    return argv + option_flags(extra or {})


class TransformersServeEngine(ManagedEngine):
    """A `transformers serve` process for one model (CPU or GPU)."""

    kind = "transformers-serve"
    usage = "transformers-serve:MODEL_OR_PATH"
    MISSING_HINT = "install the lab's requirements (transformers[serving]) or set LAB_TRANSFORMERS to a `transformers` executable"
    OPTIONS = {
        **MANAGED_OPTIONS,
        "device": "auto | cpu | cuda | cuda:N (default auto)",
        "dtype": "auto | bfloat16 | float16 | float32 (default auto)",
        "max_model_len": "context length (default: the model's config, e.g. max_position_embeddings)",
    }

    def __init__(self, config: EngineConfig) -> None:
        model, lora, name = model_lora_name(config, "transformers-serve:/path/to/model or transformers-serve:ORG/MODEL")
        if lora:
            raise EngineSpecError(
                f"engine spec '{config.spec}': transformers serve has no LoRA option; "
                "serve a merged model, or use vllm:… or transformers:…?lora="
            )
        super().__init__(config, model_id=model, name=name)
        self.device = str(self.options.pop("device", "auto"))
        self.dtype = str(self.options.pop("dtype", "auto"))
        self.trust_remote_code = bool(config.preset.trust_remote_code) if config.preset else False
        self.model_source = model
        asked = self.options.pop("max_model_len", None)
        self.asked_max_model_len = int(as_number(asked, "max_model_len", int)) if asked is not None else None
        self.context: tuple[int, str] | None = (self.asked_max_model_len, "max_model_len option") if asked else None
        self._generation_base: dict | None = None

    def dtype_text(self) -> str | None:
        return self.dtype

    def prepare(self) -> None:
        self.model_source = check_model_source(self.model_id)
        if self.context is None:  # `transformers serve` does not report it: read the model's config
            self.context = read_context_length(self.model_source)

    def configured_max_model_len(self) -> int | None:
        return self.context[0] if self.context else None

    def context_guard(self) -> tuple[int, str] | None:
        return self.context

    def generation_base(self) -> dict:
        """The model's generation config (eos/pad/bos ids …): `transformers serve` applies it with
        the request's sampling only when the request carries it whole (else do_sample: false wins)."""
        if self._generation_base is None:
            self._generation_base = model_generation_config(self.model_source)
        return self._generation_base

    def server_argv(self, port: int) -> list[str]:
        return transformers_serve_argv(transformers_executable(), self.model_source, port, device=self.device,
                                       dtype=self.dtype, trust_remote_code=self.trust_remote_code, extra=self.extra)

    def served_model(self) -> str:
        return self.model_source

    def server_env(self) -> dict[str, str]:
        return {**super().server_env(), "TOKENIZERS_PARALLELISM": "false"}

    def uses_local_cpu(self) -> bool:
        return self.gpu is None and not self.device.startswith("cuda")

    def device_text(self) -> str:
        return f"server ({self.device}{', GPU ' + self.gpu if self.gpu is not None else ''})"
