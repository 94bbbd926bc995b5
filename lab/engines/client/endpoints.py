"""The endpoints of one engine: `http://a:8000/v1,http://b:8000/v1#MODEL` gives two replicas.

Requests go to the replica with the fewest requests in flight (ties: the one used least
recently); a replica that failed to connect rests for a few seconds before it is tried again.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from lab.errors import EngineSpecError

REST_S = 2.0  # first rest of a replica that failed to connect; doubles per failure
MAX_REST_S = 30.0


def api_root(base_url: str) -> str:
    """`http://h:8000`, `http://h:8000/`, `http://h:8000/v1/` -> `http://h:8000/v1`."""
    root = base_url.strip().rstrip("/")
    if not root.startswith(("http://", "https://")):
        raise EngineSpecError(f"openai engine: base URL must start with http:// or https://, got '{base_url[:200]}'")
    try:
        parts = urlsplit(root)
        parts.port  # noqa: B018 - raises ValueError for a port past 65535
        if not parts.hostname:
            raise ValueError("no host")
        parts.hostname.encode("idna")
    except (ValueError, UnicodeError) as exc:  # a bad port, no host, a label over 63 characters
        raise EngineSpecError(f"openai engine: base URL '{base_url[:200]}' has no valid host and port "
                              f"({str(exc)[:80] or type(exc).__name__})") from None
    return root if root.endswith("/v1") else root + "/v1"


def split_target(spec: str, target: str) -> tuple[list[str], str]:
    """`URL[,URL…]#MODEL` -> ([api roots], model); duplicates are refused."""
    urls, sep, model = target.partition("#")
    roots = [api_root(u) for u in urls.split(",") if u.strip()]
    if not sep or not roots or not model.strip():
        raise EngineSpecError(
            f"engine spec '{spec}': write openai:BASE_URL#MODEL (or URL,URL#MODEL for replicas), "
            "e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen3.5-2B"
        )
    if len(set(roots)) != len(roots):
        raise EngineSpecError(f"engine spec '{spec}': an endpoint is listed twice")
    return roots, model.strip()


@dataclass
class Replica:
    """One server of an engine and what the lab learnt about it."""

    url: str
    client: Any = None  # openai.OpenAI
    outstanding: int = 0
    failures: int = 0
    rest_until: float = 0.0
    last_used: float = 0.0
    last_error: str = ""
    refused: dict[str, str] = field(default_factory=dict)  # request field -> the server's message
    models: list[str] = field(default_factory=list)
    owner: str | None = None  # `owned_by` of its model entry (vLLM says "vllm")
    max_model_len: int | None = None
    token_ids: bool | None = None  # answers `return_token_ids` (None: not known yet)

    @property
    def resting(self) -> bool:
        return time.monotonic() < self.rest_until


class ReplicaSet:
    """Thread-safe choice of a replica per request."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.replicas)

    def acquire(self, avoid: set[str] | frozenset = frozenset()) -> Replica:
        """The replica to send the next request to (counted as outstanding until `release`):
        awake before resting, not in `avoid` before in it, fewest in flight, least recently used."""
        with self._lock:
            best = min(self.replicas, key=lambda r: (r.resting, r.url in avoid, r.outstanding, r.last_used))
            best.outstanding += 1
            best.last_used = time.monotonic()
            return best

    def release(self, replica: Replica, error: str | None = None, unreachable: bool = False) -> None:
        """The request is over: a connection failure rests the replica, a success wakes it."""
        with self._lock:
            replica.outstanding -= 1
            if unreachable:
                replica.failures += 1
                replica.rest_until = time.monotonic() + min(MAX_REST_S, REST_S * 2 ** (replica.failures - 1))
                replica.last_error = error or ""
            elif error is None:
                replica.failures, replica.rest_until, replica.last_error = 0, 0.0, ""
