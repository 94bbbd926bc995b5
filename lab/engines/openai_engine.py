"""`openai:BASE_URL#MODEL`: an OpenAI-compatible server (`vllm serve`, `transformers serve`, …).

The lab's own rendered prompt goes to `{BASE_URL}/v1/completions` (BASE_URL may end in `/v1`
or not), so the prompt shown is the prompt used. Options: `tokenizer=PATH_OR_ID` (for rendering;
default: MODEL, from a folder or the local HF cache only, never downloaded; without one the
renderer uses its identity-based formats),
`api_key=KEY` (default: $OPENAI_API_KEY), `timeout=SECONDS` (600), `retries=N` (3; connection
errors, 429 and 5xx are retried with exponential backoff), `concurrency=N` (4 parallel requests),
`check=false` (skip the reachability probe of `load()`).

vLLM-only sampling fields (`repetition_penalty`, `min_p`) are sent only when they differ from
their neutral values, because some servers (`transformers serve`) reject unknown fields (422).
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig, OnDone
from lab.engines.loading import looks_like_path
from lab.engines.spec import as_bool, as_number, short_name
from lab.errors import EngineLoadError, EngineSpecError

RETRY_STATUS = {429, 500, 502, 503, 504}


def api_root(base_url: str) -> str:
    """`http://h:8000`, `http://h:8000/`, `http://h:8000/v1/` -> `http://h:8000/v1`."""
    root = base_url.strip().rstrip("/")
    if not root.startswith(("http://", "https://")):
        raise EngineSpecError(f"openai engine: base URL must start with http:// or https://, got '{base_url}'")
    return root if root.endswith("/v1") else root + "/v1"


def completion_body(model: str, prompt: str, sampling: Sampling) -> dict:
    """The /v1/completions request body for one prompt."""
    body: dict = {
        "model": model,
        "prompt": prompt,
        "max_tokens": int(sampling.max_tokens),
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
    }
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        body["seed"] = int(sampling.seed)
    if float(sampling.repetition_penalty) != 1.0:
        body["repetition_penalty"] = float(sampling.repetition_penalty)  # vLLM extension
    if sampling.min_p and sampling.min_p > 0:
        body["min_p"] = float(sampling.min_p)  # vLLM extension
    return body


def error_detail(response) -> str:
    """The server's error message from a JSON body (`detail`, `error.message`, `message`) or text."""
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        for key in ("detail", "message", "error"):
            if data.get(key):
                return str(data[key])[:300]
    return str(data)[:300]


class OpenAIEngine(EngineBase):
    """Sends rendered prompts to `/v1/completions` with httpx, a few at a time."""

    kind = "openai"
    OPTIONS = {
        "tokenizer": "tokenizer folder or Hub id used to render prompts (default: MODEL)",
        "api_key": "bearer token (default: $OPENAI_API_KEY)",
        "timeout": "seconds per request (default 600)",
        "retries": "retries on connection errors, 429 and 5xx (default 3)",
        "concurrency": "parallel requests (default 4)",
        "check": "probe the server in load() (default true)",
    }

    def __init__(self, config: EngineConfig) -> None:
        base, sep, model = config.target.partition("#")
        if not sep or not base.strip() or not model.strip():
            raise EngineSpecError(
                f"engine spec '{config.spec}': write openai:BASE_URL#MODEL, e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen3.5-2B"
            )
        self.base_url = api_root(base)
        super().__init__(config, model_id=model.strip(), name=short_name(model.strip()))
        self.api_key = self.option("api_key") or os.environ.get("OPENAI_API_KEY") or None
        self.timeout = float(as_number(self.option("timeout", 600), "timeout"))
        self.retries = int(as_number(self.option("retries", 3), "retries", int))
        self.concurrency = max(1, int(as_number(self.option("concurrency", 4), "concurrency", int)))
        self.check = as_bool(self.option("check", True), "check")
        self.backoff_s = 0.5
        self.client = None
        self.server_models: list[str] = []

    # --- loading ---------------------------------------------------------------------
    def _load_tokenizer(self):
        """Try the tokenizer from a folder or the local HF cache (never downloads, so an offline
        lab does not hang); None means the renderer uses its identity-based formats."""
        from transformers import AutoTokenizer

        source = self.option("tokenizer") or self.model_id
        try:
            return AutoTokenizer.from_pretrained(source, local_files_only=not looks_like_path(source))
        except Exception:  # noqa: BLE001 - no tokenizer: the renderer uses identity-based formats
            return None

    def load(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.client = httpx.Client(
            timeout=httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
            headers=headers,
            limits=httpx.Limits(max_connections=self.concurrency * 2),
        )
        if self.check:
            try:
                response = self.client.get(f"{self.base_url}/models", timeout=10.0)
            except httpx.HTTPError as exc:
                self.client.close()
                self.client = None
                raise EngineLoadError(
                    f"OpenAI-compatible endpoint {self.base_url} is unreachable ({type(exc).__name__}: {exc}); "
                    "start the server (vllm serve / transformers serve) or fix the URL"
                ) from None
            if response.status_code == 200:
                data = response.json().get("data") or []
                self.server_models = [str(m.get("id")) for m in data if isinstance(m, dict)]
        self.tokenizer = self._load_tokenizer()
        self.loaded = True

    # --- generation ------------------------------------------------------------------
    def _post(self, body: dict) -> Completion:
        """One request with retries; every failure becomes Completion.error."""
        import httpx

        url = f"{self.base_url}/completions"
        start = time.perf_counter()
        last_error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                try:
                    response = self.client.post(url, json=body)
                except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                    # A pooled keep-alive connection the server already closed: retry once at
                    # once on a fresh connection, outside the retry budget (a completion is idempotent).
                    response = self.client.post(url, json=body)
            except httpx.TimeoutException:
                last_error = f"request to {url} timed out after {self.timeout:g} s"
                continue
            except httpx.TransportError as exc:
                last_error = f"endpoint {self.base_url} unreachable ({type(exc).__name__}: {exc})"
                continue
            if response.status_code in RETRY_STATUS:
                last_error = f"server error {response.status_code} from {url}: {error_detail(response)}"
                continue
            if response.status_code == 404:
                return Completion(text="", error=f"404 from {url}: model '{self.model_id}' unknown or no /v1/completions route: {error_detail(response)}")
            if response.status_code >= 400:
                return Completion(text="", error=f"server rejected the request ({response.status_code}): {error_detail(response)}")
            return self._parse(response, time.perf_counter() - start)
        return Completion(text="", error=f"{last_error} (after {self.retries + 1} attempts)")

    @staticmethod
    def _parse(response, latency: float) -> Completion:
        try:
            data = response.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            return Completion(text="", error=f"unexpected response (not a completions answer): {response.text[:200]}")
        usage = data.get("usage") or {}
        token_ids = choice.get("token_ids") if isinstance(choice.get("token_ids"), list) else []
        return Completion(
            text=str(choice.get("text") or ""),
            finish_reason=choice.get("finish_reason"),
            stop_reason=choice.get("stop_reason"),
            token_ids=token_ids,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_s=latency,
        )

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        if self.client is None:
            raise EngineLoadError(f"engine '{self.name}' is not loaded: call load() first")
        results: list = [None] * len(requests)
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix=f"openai-{self.name}") as pool:
            futures = {
                pool.submit(self._post, completion_body(self.model_id, r.prompt, sampling)): i
                for i, r in enumerate(requests)
            }
            for future in as_completed(futures):
                index = futures[future]
                try:
                    completion = future.result()
                except Exception as exc:  # noqa: BLE001
                    completion = Completion(text="", error=f"{type(exc).__name__}: {exc}")
                self.finish(index, completion, results, on_done)
        return results

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
        self.loaded = False

    def engine_settings(self) -> dict:
        """SPEC §8 `sampling` keys describing the engine (the HTTP evaluator's gpu field)."""
        return {"base_url": self.base_url, "concurrency": self.concurrency}

    def describe(self) -> EngineInfo:
        listed = "listed" if self.model_id in self.server_models else "not listed"
        notes = f"{self.base_url}; model {listed} by /v1/models" if self.server_models else self.base_url
        if self.loaded and self.tokenizer is None:
            notes += "; no local tokenizer (identity-based prompt formats)"
        return EngineInfo(kind=self.kind, model=self.model_id, device=f"remote {self.base_url}", notes=notes)
