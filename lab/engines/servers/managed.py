"""`ManagedEngine`: an engine whose model runs in a server process the lab starts and stops.

`load()` starts the server (its own process group, a free 127.0.0.1 port, its own log),
waits until it answers, then talks to it through the lab's OpenAI-compatible client, exactly
like an `openai:` engine. Subclasses give the command line (`server_argv`) and the model name
the server answers to (`served_model`).
"""
from __future__ import annotations

import time
from abc import abstractmethod
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

from lab.engines import cpu_share
from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import COMMON_OPTIONS, EngineBase, EngineConfig, OnDone
from lab.engines.loading import rendering_tokenizer_soon
from lab.engines.servers.config import log_dir, log_file_name, server_settings
from lab.engines.servers.gpu_memory import gpu_memory_gb
from lab.engines.servers.missing import last_exception, missing_package
from lab.engines.servers.supervisor import READY, ManagedServer, ServerFailed
from lab.engines.spec import as_number
from lab.errors import EngineLoadError, EngineSpecError

if TYPE_CHECKING:
    from lab.engines.openai_engine import OpenAIEngine

MANAGED_OPTIONS = {
    "concurrency": "parallel requests (default: 64 for vLLM, 4 for transformers serve)",
    "gpu": "GPU index for this server (sets CUDA_VISIBLE_DEVICES)",
    "tokenizer": "tokenizer folder or Hub id used to render prompts (default: the model)",
    "ready_timeout": "seconds the server may take to answer after it starts",
    "*": "any other option becomes a server flag: max_num_seqs=128 -> --max-num-seqs 128",
}


class ManagedEngine(EngineBase):
    """A model served by a supervised local process; generation goes through the OpenAI client."""

    managed = True  # the pool starts these one at a time
    scores_reference = True
    takes_preset = True
    overlong_prompt = "reject"  # refused (by the server or the lab's guard); never cut (vLLM: "shorten")
    MISSING_HINT = ""  # what to do when the server's executable cannot be started
    PASSTHROUGH = True  # options that are not the lab's become server flags (`self.extra`)
    GPU_LIST = False  # `gpu=0,1` (one GPU per tensor-parallel rank) is accepted

    def __init__(self, config: EngineConfig, *, model_id: str, name: str) -> None:
        known = set(COMMON_OPTIONS) | set(self.OPTIONS)
        extra = {k: v for k, v in config.options.items() if k not in known} if self.PASSTHROUGH else {}
        if "trust_remote_code" in extra:
            raise EngineSpecError(
                f"engine spec '{config.spec}': trust_remote_code is never a SPEC option; only a preset that "
                "declares `trust_remote_code: true` in assets/models.yaml runs a model's own code"
            )
        config = replace(config, options={k: v for k, v in config.options.items() if k not in extra})
        super().__init__(config, model_id=model_id, name=name)
        self.extra = extra
        kind_settings = server_settings()
        default_concurrency = int((kind_settings.get("concurrency") or {}).get(self.kind, 4))
        cap = self.options.pop("concurrency", None)
        self.concurrency = int(as_number(cap, "concurrency", int)) if cap is not None else default_concurrency
        if self.concurrency < 1:
            raise EngineSpecError(f"engine spec '{self.spec}': concurrency must be at least 1")
        gpu = self.options.pop("gpu", None)
        self.gpu_option = gpu
        if gpu is not None and self.GPU_LIST and "," in str(gpu):
            self.gpu = str(gpu)  # one GPU per tensor-parallel rank; the subclass checks the list
        else:
            self.gpu = str(int(as_number(gpu, "gpu", int))) if gpu is not None else None
        self.tokenizer_source = self.options.pop("tokenizer", None)
        timeout = self.options.pop("ready_timeout", None)
        default_timeout = float((kind_settings.get("ready_timeout") or {}).get(self.kind, 600))
        self.ready_timeout = float(as_number(timeout, "ready_timeout")) if timeout is not None else default_timeout
        self.server: ManagedServer | None = None
        self.client: OpenAIEngine | None = None

    # --- what subclasses give ------------------------------------------------------------
    @abstractmethod
    def server_argv(self, port: int) -> list[str]:
        """The command that serves the model on 127.0.0.1:`port`."""

    @abstractmethod
    def served_model(self) -> str:
        """The model name requests must use (`--served-model-name`, a LoRA module, …)."""

    def prepare(self) -> None:
        """Work before the server starts (e.g. fetch a LoRA adapter); default: nothing."""

    def server_env(self) -> dict[str, str]:
        """Environment added to the lab's for the server."""
        return {"CUDA_VISIBLE_DEVICES": self.gpu} if self.gpu is not None else {}

    def client_options(self) -> dict[str, str]:
        """Options the lab's OpenAI client needs for this server (e.g. the key it requires)."""
        return {}

    def rendering_tokenizer(self) -> str:
        return self.tokenizer_source or self.model_id

    def prompt_as_ids(self) -> bool:
        """Whether the client sends each prompt as the token ids the lab rendered instead of its text:
        only to a server that tokenizes with the very tokenizer the lab renders with."""
        return False

    # --- life cycle ----------------------------------------------------------------------
    def load(self) -> None:
        start = time.perf_counter()
        self.prepare()
        self.server = ManagedServer(
            self.name, self.server_argv, log_dir() / log_file_name(self.name),
            env=self.server_env(), ready_timeout=self.ready_timeout,
        )
        try:
            self.server.start()
        except ServerFailed as exc:
            raise ServerFailed(f"{exc}. {self.MISSING_HINT}".rstrip(". ")) from None
        tokenizer = rendering_tokenizer_soon(self.rendering_tokenizer())  # loads while the server starts
        try:
            self.server.wait_ready()
            self._connect(tokenizer)
        except ServerFailed:
            self.server.stop()
            lines = self.server.tail(400, since_start=True)
            package = missing_package(lines)
            if package is None:
                reason = last_exception(lines)
                if reason is None:
                    raise
                raise ServerFailed(f"{self.name}: server {self.server.status_text()}: {reason} "
                                   f"(log {self.server.log_path})") from None
            raise ServerFailed(
                f"{self.name}: server {self.server.status_text()}: its Python environment lacks the package "
                f"'{package}' that this model needs; {self.package_hint(package)} (log {self.server.log_path})"
            ) from None
        except BaseException:
            self.server.stop()
            raise
        self.load_time_sec = time.perf_counter() - start
        self.loaded = True

    def package_hint(self, package: str) -> str:
        """What to do when the server's environment lacks `package`."""
        return f"install {package} where the server's executable ({self.server.argv[0]}) runs"

    def _connect(self, tokenizer: Future | None = None) -> None:
        """(Re)build the OpenAI-compatible client for the running server; `tokenizer`: the rendering
        tokenizer already loading (else the client loads it)."""
        if self.client is not None:
            self.client.close()
        client = self.client_for(self.server.base_url, tokenizer)
        client.load()
        self.client = client
        self.tokenizer = client.tokenizer
        self.max_model_len = client.max_model_len or self.configured_max_model_len()

    def client_for(self, base_url: str, tokenizer: Future | None = None) -> OpenAIEngine:
        """The OpenAI-compatible client (not loaded) of this engine's server at `base_url`."""
        from lab.engines.openai_engine import OpenAIEngine

        options = {"tokenizer": self.rendering_tokenizer(), "concurrency": str(self.concurrency),
                   "logprobs": str(self.logprobs_k), **self.client_options()}
        client = OpenAIEngine(EngineConfig(
            spec=self.spec, kind="openai", target=f"{base_url}/v1#{self.served_model()}", options=options,
        ))
        client.name = self.name
        client.context_guard = self.context_guard()
        client.generation_base = self.generation_base()
        client.prompt_as_ids = self.prompt_as_ids()
        client.tokenizer_soon = tokenizer
        return client

    def configured_max_model_len(self) -> int | None:
        """The context length the server was started with, when the lab chose it."""
        return None

    def generation_base(self) -> dict | None:
        """The model's generation config, when the server needs it sent with every request to
        apply the request's sampling (`transformers serve`); None when it takes the fields."""
        return None

    def context_guard(self) -> tuple[int, str] | None:
        """(context, where it was read) when the lab must refuse over-long prompts itself because
        the server would generate past the model's positions; None when the server refuses them."""
        return None

    def restart(self) -> None:
        """Restart the server (a fresh port) and reconnect the client."""
        if self.server is None:
            self.load()
            return
        if self.client is not None:
            self.client.close()
            self.client = None
        self.loaded = False
        if self.tokenizer is not None:  # the same source as at the start: kept, not loaded again
            tokenizer: Future = Future()
            tokenizer.set_result(self.tokenizer)
        else:
            tokenizer = rendering_tokenizer_soon(self.rendering_tokenizer())
        self.server.restart(self.ready_timeout)
        self._connect(tokenizer)
        self.loaded = True

    def close(self) -> None:
        """Close the client and stop the server's whole process group."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.server is not None:
            self.server.stop()
        self.loaded = False

    # --- generation ----------------------------------------------------------------------
    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        if self.client is None or self.server is None:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        if self.server.state != READY:
            raise EngineLoadError(f"server {self.server.failure_text()}")
        with cpu_share.generating(self) if self.uses_local_cpu() else nullcontext():
            return self.client.generate(requests, sampling, on_done)

    def cancel(self) -> None:
        """Drop the requests in flight (Stop): the client closes their connections, the server aborts them,
        and the answers already finished stay delivered."""
        if self.client is not None:
            self.client.cancel()

    def score_reference(self, prompt: str, reference: str):
        """The reference's token log-probabilities under the served model (lab.engines.reference_likelihood)."""
        if self.client is None or self.server is None or self.server.state != READY:
            raise EngineLoadError(f"engine '{self.name}' is not ready: load it first")
        return self.client.score_reference(prompt, reference)

    # --- what the UI and result files read ----------------------------------------------
    def live_progress(self):
        """The client's: it streams the server's answers."""
        return self.client.live_progress() if self.client is not None else super().live_progress()

    def server_status(self) -> dict:
        """State, PID, port, exit code, log file and log tail of the server, GPU memory held."""
        server = self.server
        if server is None:
            return {"state": "waiting to start", "pid": None, "port": None, "exit_code": None,
                    "log": None, "tail": [], "gpu_memory_gb": None, **self.placement()}
        state = server.state
        return {
            "state": state,
            "status": server.status_text(),
            "pid": server.pid,
            "port": server.port,
            "exit_code": server.exit_code,
            "log": str(server.log_path),
            "tail": server.tail(15) if state != READY else [],
            "gpu_memory_gb": gpu_memory_gb(server.process_ids()),
            "ready_after_s": server.ready_after_s,
            **self.placement(),
        }

    def server_down(self) -> str | None:
        server = self.server
        if server is not None and server.state in ("crashed", "stopped"):
            return server.failure_text()
        return None

    def placement(self) -> dict:
        """Where the server runs, as the status table shows it before `describe()` can be asked:
        its device text and (vLLM's CPU backend) the RAM budget of its KV cache."""
        return {"device": self.device_text(), "kv_cache_gb": None}

    def device_text(self) -> str:
        return f"server (GPU {self.gpu})" if self.gpu is not None else "server"

    def describe(self) -> EngineInfo:
        server = self.server
        notes = ""
        if server is not None:
            notes = f"{server.base_url} · pid {server.pid} · log {server.log_path}"
        from lab.engines.model_facts import config_facts, server_flags

        # what the server was given (a visitor's ORG/NAME: its Hub cache folder, never a same-named local one)
        architecture, config_context = config_facts(self.model_source)
        return EngineInfo(kind=self.kind, model=self.model_id, device=self.device_text(),
                          memory_gb=gpu_memory_gb(server.process_ids()) if server else None,
                          lora=self.lora, notes=notes, architecture=architecture,
                          context_length=self.max_model_len or config_context, dtype=self.dtype_text(),
                          flags=server_flags(list(server.argv), self.model_id) if server is not None else None)

    def dtype_text(self) -> str | None:
        """The dtype the server runs the model in, as it was asked ('auto': the server's choice)."""
        return None

    def engine_settings(self) -> dict:
        """SPEC §8 `sampling` keys: the client's settings plus the server's command line."""
        settings = dict(self.client.engine_settings()) if self.client is not None else {}
        if not settings.get("max_model_len") and self.max_model_len:  # `transformers serve` does not report it:
            settings["max_model_len"] = self.max_model_len  # the context the lab read from the model's config
        if self.server is not None:
            settings["server_argv"] = list(self.server.argv)
        return settings
