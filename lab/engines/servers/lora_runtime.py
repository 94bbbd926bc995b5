"""Load and unload LoRA adapters in a running `vllm serve` (vLLM's runtime LoRA endpoints).

A server started with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` (the `vllm:` engine's `runtime_lora=true`)
answers `POST /v1/load_lora_adapter {"lora_name", "lora_path"}` and `POST /v1/unload_lora_adapter
{"lora_name"}`; the loaded adapter is then a model name for `/v1/completions`, like one given with
`--lora-modules` at start. A failure is an EngineLoadError naming the adapter and the server's reason.
"""
from __future__ import annotations

import httpx

from lab.errors import EngineLoadError

TIMEOUT_S = 300.0  # loading reads the adapter's weights from disk and moves them to the device


def _post(base_url: str, path: str, body: dict, api_key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=TIMEOUT_S, trust_env=False) as client:
        return client.post(f"{base_url}{path}", json=body, headers=headers)


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else (body.get("message") or body.get("detail")
                                                                         if isinstance(body, dict) else None)
    except ValueError:
        message = None
    return " ".join(str(message or response.text or "").split())[:300]


def load_adapter(base_url: str, name: str, folder: str, api_key: str | None = None) -> None:
    """Serve the adapter in `folder` as model `name` from now on."""
    try:
        response = _post(base_url, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": folder}, api_key)
    except httpx.HTTPError as exc:
        raise EngineLoadError(f"cannot load LoRA adapter {folder} into {base_url}: {type(exc).__name__}: {exc}") from None
    if response.status_code == 404 and _reason(response) in ("", "Not Found"):  # no such route: not enabled
        raise EngineLoadError(f"{base_url} does not load LoRA adapters at run time: start it with runtime_lora=true "
                              "(VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)")
    if response.status_code != 200:
        raise EngineLoadError(f"cannot load LoRA adapter {folder} into {base_url}: HTTP {response.status_code}: "
                              f"{_reason(response)}")


def unload_adapter(base_url: str, name: str, api_key: str | None = None) -> None:
    """Stop serving adapter `name` (its memory is freed); one not loaded is not an error."""
    try:
        response = _post(base_url, "/v1/unload_lora_adapter", {"lora_name": name}, api_key)
    except httpx.HTTPError as exc:
        raise EngineLoadError(f"cannot unload LoRA adapter {name} from {base_url}: {type(exc).__name__}: {exc}") from None
    if response.status_code not in (200, 404):
        raise EngineLoadError(f"cannot unload LoRA adapter {name} from {base_url}: HTTP {response.status_code}: "
                              f"{_reason(response)}")
