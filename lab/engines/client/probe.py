"""What a server says about itself at `/v1/models`: served model ids, `max_model_len`, owner.

vLLM puts `max_model_len` in each model entry (and `owned_by: "vllm"`); some servers use
`context_length`. `transformers serve` answers 500 here when no Hugging Face cache exists: the
server is up, it just lists nothing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai

LENGTH_KEYS = ("max_model_len", "context_length", "max_context_length")


@dataclass
class ServerModels:
    """The answer of `/v1/models` (empty when the server does not list models)."""

    ids: list[str] = field(default_factory=list)
    owner: str | None = None
    max_model_len: int | None = None
    note: str = ""


def model_entry_length(entry: dict) -> int | None:
    """The context length a model entry declares, if any."""
    for key in LENGTH_KEYS:
        value = entry.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def read_models(client: openai.OpenAI, model: str) -> ServerModels:
    """List the models of a server (one try); connection errors propagate (unreachable)."""
    import openai

    try:
        page = client.with_options(max_retries=0, timeout=15.0).models.list()
    except openai.APIConnectionError:
        raise
    except openai.APIStatusError as exc:
        return ServerModels(note=f"/v1/models answered {exc.status_code}")
    entries = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in page.data]
    ids = [str(e.get("id")) for e in entries]
    mine = next((e for e in entries if e.get("id") == model), None)
    if mine is None and len(entries) == 1:
        mine = entries[0]
    return ServerModels(
        ids=ids,
        owner=(mine or {}).get("owned_by"),
        max_model_len=model_entry_length(mine) if mine else None,
    )
