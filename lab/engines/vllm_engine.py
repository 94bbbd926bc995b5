"""`vllm:MODEL_OR_PRESET`: in-process `vllm.LLM` (GPU), one batched `generate` per call.

vLLM is imported only in `load()`; without it the engine fails to load with a clear message.
Engine settings come from the preset (or the presets file's `defaults.engine`) and can be
overridden per SPEC: `vllm:qwen35-2b-sft?gpu_memory_utilization=0.45&max_model_len=16384`.
LoRA adapters (`lora=PATH_OR_ID`, or a preset's `lora:`) load through `enable_lora` + `LoRARequest`.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig, OnDone, model_lora_name
from lab.engines.loading import check_model_source, load_failure
from lab.engines.presets import ENGINE_KEYS, load_engine_defaults
from lab.engines.spec import as_bool, as_number, short_name
from lab.errors import EngineLoadError

VLLM_MISSING = "vLLM is not installed: pip install -r requirements-gpu.txt (needs a CUDA GPU)"
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
SETTING_TYPES = {
    "dtype": str,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "max_model_len": int,
    "gpu_memory_utilization": float,
    "language_model_only": bool,
    "enable_prefix_caching": bool,
    "max_lora_rank": int,
    "enforce_eager": bool,
    "max_num_seqs": int,
}


def typed_setting(key: str, value: object) -> object:
    """Convert a SPEC option string to the type of the engine setting."""
    kind = SETTING_TYPES[key]
    if kind is bool:
        return as_bool(value, key)
    if kind is str:
        return str(value)
    return as_number(value, key, kind)


def lora_rank_setting(rank: int | None) -> int:
    """vLLM's `max_lora_rank` must be one of its allowed sizes: round the adapter's rank up."""
    rank = int(rank or 16)
    for allowed in LORA_RANKS:
        if rank <= allowed:
            return max(allowed, 16)
    raise EngineLoadError(f"LoRA rank {rank} is larger than vLLM supports ({LORA_RANKS[-1]})")


def vllm_llm_kwargs(
    model: str,
    settings: dict,
    *,
    lora_rank: int | None = None,
    trust_remote_code: bool = False,
    tokenizer: str | None = None,
) -> dict:
    """The `vllm.LLM(**kwargs)` for a model and engine settings (pure: testable without vLLM)."""
    kwargs: dict = {
        "model": model,
        "dtype": settings.get("dtype", "bfloat16"),
        "tensor_parallel_size": int(settings.get("tensor_parallel_size", 1)),
        "max_model_len": int(settings.get("max_model_len", 49152)),
        "gpu_memory_utilization": float(settings.get("gpu_memory_utilization", 0.92)),
        "enable_prefix_caching": bool(settings.get("enable_prefix_caching", True)),
        "trust_remote_code": bool(trust_remote_code),
    }
    if tokenizer:
        kwargs["tokenizer"] = tokenizer
    if int(settings.get("pipeline_parallel_size", 1)) > 1:
        kwargs["pipeline_parallel_size"] = int(settings["pipeline_parallel_size"])
        kwargs["distributed_executor_backend"] = "ray"
    if settings.get("language_model_only"):
        kwargs["language_model_only"] = True
    for key in ("enforce_eager", "max_num_seqs"):
        if settings.get(key) is not None:
            kwargs[key] = settings[key]
    if lora_rank is not None:
        kwargs["enable_lora"] = True
        kwargs["max_loras"] = 1
        kwargs["max_lora_rank"] = int(settings.get("max_lora_rank") or lora_rank_setting(lora_rank))
    return kwargs


def vllm_sampling_kwargs(sampling: Sampling) -> dict:
    """`SamplingParams(**kwargs)` as the harness sends them (SPEC §8): min_p only if > 0,
    stop strings only if given."""
    kwargs: dict = {
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "max_tokens": int(sampling.max_tokens),
        "repetition_penalty": float(sampling.repetition_penalty),
        "skip_special_tokens": True,
    }
    if sampling.min_p and sampling.min_p > 0:
        kwargs["min_p"] = float(sampling.min_p)
    if sampling.stop:
        kwargs["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        kwargs["seed"] = int(sampling.seed)
    return kwargs


def adapter_rank(folder: str) -> int | None:
    """The LoRA rank `r` from an adapter folder's adapter_config.json, if readable."""
    try:
        return int(json.loads((Path(folder) / "adapter_config.json").read_text())["r"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def local_adapter(lora: str) -> str:
    """vLLM's LoRARequest needs a folder: download a Hub adapter into the HF cache first."""
    if Path(lora).expanduser().is_dir():
        return str(Path(lora).expanduser())
    check_model_source(lora, "LoRA adapter")
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(lora)
    except Exception as exc:  # noqa: BLE001
        raise load_failure(lora, exc, "LoRA adapter") from None


class VLLMEngine(EngineBase):
    """In-process vLLM; settings from the preset, overridable per SPEC option."""

    kind = "vllm"
    OPTIONS = {
        **{key: "vLLM engine setting" for key in ENGINE_KEYS},
        "lora": "LoRA adapter folder or Hub id",
        "tokenizer": "tokenizer folder or Hub id (default: the model)",
    }

    def __init__(self, config: EngineConfig) -> None:
        preset = config.preset
        model, lora, name = model_lora_name(config, "vllm:qwen35-2b-sft (a preset) or vllm:ORG/MODEL")
        super().__init__(config, model_id=model, name=name)
        self.lora = lora
        settings = dict(preset.engine) if preset else load_engine_defaults()
        for key in ENGINE_KEYS:
            if key in self.options:
                settings[key] = typed_setting(key, self.options.pop(key))
        self.settings = settings
        self.trust_remote_code = bool(preset.trust_remote_code) if preset else False
        self.llm = None
        self.lora_request = None
        self.llm_kwargs: dict = {}
        self.last_gen_time_s: float | None = None

    def load(self) -> None:
        try:
            import vllm
            from vllm.lora.request import LoRARequest
        except ImportError:
            raise EngineLoadError(VLLM_MISSING) from None
        model = check_model_source(self.model_id)
        adapter = local_adapter(self.lora) if self.lora else None
        self.llm_kwargs = vllm_llm_kwargs(
            model,
            self.settings,
            lora_rank=(adapter_rank(adapter) or 16) if adapter else None,
            trust_remote_code=self.trust_remote_code,
            tokenizer=self.option("tokenizer"),
        )
        start = time.perf_counter()
        try:
            self.llm = vllm.LLM(**self.llm_kwargs)
        except Exception as exc:  # noqa: BLE001 - CUDA OOM, unknown model, bad setting …
            raise load_failure(self.model_id, exc) from None
        self.load_time_sec = time.perf_counter() - start
        if adapter:
            self.lora_request = LoRARequest(short_name(self.lora), 1, adapter)
        self.tokenizer = self.llm.get_tokenizer()
        self.loaded = True

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        if self.llm is None:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        from vllm import SamplingParams

        results: list = [None] * len(requests)
        with self._lock:
            start = time.perf_counter()
            try:
                outputs = self.llm.generate(
                    [r.prompt for r in requests],
                    SamplingParams(**vllm_sampling_kwargs(sampling)),
                    lora_request=self.lora_request,
                    use_tqdm=False,
                )
            except Exception as exc:  # noqa: BLE001 - reported per request, the lab keeps going
                message = f"vLLM generate failed: {type(exc).__name__}: {exc}"
                for i in range(len(requests)):
                    self.finish(i, Completion(text="", error=message), results, on_done)
                return results
            self.last_gen_time_s = time.perf_counter() - start
        for i, output in enumerate(outputs):
            best = output.outputs[0]
            metrics = getattr(output, "metrics", None)
            first, arrival = getattr(metrics, "first_token_time", None), getattr(metrics, "arrival_time", None)
            self.finish(
                i,
                Completion(
                    text=best.text,
                    finish_reason=best.finish_reason,
                    stop_reason=best.stop_reason,
                    token_ids=list(best.token_ids),
                    prompt_tokens=len(output.prompt_token_ids or []),
                    completion_tokens=len(best.token_ids),
                    ttft_s=(first - arrival) if first and arrival else None,
                    latency_s=self.last_gen_time_s,
                ),
                results,
                on_done,
            )
        return results

    def close(self) -> None:
        with self._lock:
            self.llm = None
            self.tokenizer = None
            self.loaded = False
        try:
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass

    def engine_settings(self) -> dict:
        """SPEC §8 `sampling` keys describing the engine (llm_kwargs = what LLM() was given)."""
        return {
            "dtype": self.settings.get("dtype"),
            "tp": self.settings.get("tensor_parallel_size", 1),
            "max_model_len": self.settings.get("max_model_len"),
            "language_model_only": bool(self.settings.get("language_model_only")),
            "enable_prefix_caching": bool(self.settings.get("enable_prefix_caching", True)),
            "lora_path": self.lora,
            "lora_name": short_name(self.lora) if self.lora else None,
            "llm_kwargs": dict(self.llm_kwargs),
        }

    def describe(self) -> EngineInfo:
        memory = None
        if self.loaded:
            try:
                import torch

                free, total = torch.cuda.mem_get_info()  # vLLM's engine core may be another process
                memory = round((total - free) / 2**30, 3)
            except Exception:  # noqa: BLE001
                memory = None
        return EngineInfo(
            kind=self.kind,
            model=self.model_id,
            device=f"cuda (tp={self.settings.get('tensor_parallel_size', 1)}, {self.settings.get('dtype', 'bfloat16')})",
            memory_gb=memory,
            lora=self.lora,
            notes=f"gpu_memory_utilization={self.settings.get('gpu_memory_utilization')}",
        )
