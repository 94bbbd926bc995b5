"""A hostile OpenAI-compatible server on 127.0.0.1: a real HTTP server speaking the completions API
(`/v1/models`, `/v1/completions` streamed as server-sent events or answered whole) whose answers say
what a test wants them to, however malformed (a `top_logprobs` that is a list, a 400-digit number, a
key holding a lone UTF-16 surrogate). What it sends is JSON text written by `json.dumps`, so a number
of 400 digits goes out as 400 digits and a lone surrogate as its `\\udXXX` escape, as a server could."""
from __future__ import annotations

import http.server
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tests.helpers_servers import http_on_loopback


@dataclass
class HostileAnswer:
    """What the server answers every completion with: `text` in `pieces` chunks, each chunk's
    `logprobs` object (as sent, or None), and, for a request with `prompt_logprobs`, `prompt_logprobs`
    made by a function of the request's prompt token ids."""

    text: str = '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls -la\\n", "duration": 0.1}]}'
    logprobs: Callable[[int, str], Any] | None = None  # (chunk index, chunk text) -> the chunk's logprobs
    pieces: int = 3
    prompt_logprobs: Callable[[list[int]], Any] | None = None
    usage: dict | None = None  # the last chunk's `usage`, as sent (default: counts of this answer)
    bodies: list[dict] = field(default_factory=list)  # every completion request received


def _chunks(text: str, pieces: int) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _handler(model: str, answer: HostileAnswer) -> type:
    class Hostile(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode("ascii")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/").endswith("/v1/models"):
                self._json(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "hostile",
                                                             "max_model_len": 65536}]})
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            answer.bodies.append(body)
            if not self.path.rstrip("/").endswith("/v1/completions"):
                self._json(404, {"error": {"message": "not found"}})
                return
            if "prompt_logprobs" in body:  # the reference's likelihood: one whole answer
                prompt = body.get("prompt") if isinstance(body.get("prompt"), list) else []
                rows = answer.prompt_logprobs(prompt) if answer.prompt_logprobs else None
                self._json(200, {"id": "c", "object": "text_completion", "created": 0, "model": model,
                                 "choices": [{"index": 0, "text": "", "finish_reason": "length",
                                              "prompt_logprobs": rows}]})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            asked = int(body.get("logprobs") or 0)
            texts = _chunks(answer.text, answer.pieces)
            for i, piece in enumerate(texts):
                choice: dict[str, Any] = {"index": 0, "text": piece, "finish_reason": None}
                if asked and answer.logprobs is not None:
                    choice["logprobs"] = answer.logprobs(i, piece)
                self._event({"id": "c", "object": "text_completion", "created": 0, "model": model, "choices": [choice]})
            usage = answer.usage or {"prompt_tokens": 7, "completion_tokens": len(texts), "total_tokens": 7 + len(texts)}
            self._event({"id": "c", "object": "text_completion", "created": 0, "model": model,
                         "choices": [{"index": 0, "text": "", "finish_reason": "stop"}], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode("ascii") + b"\n\n")
            self.wfile.flush()

    return Hostile


@contextmanager
def hostile_openai(model: str, answer: HostileAnswer) -> Iterator[str]:
    """Serve `answer` for `model` on a free loopback port; yields the base URL (without /v1)."""
    with http_on_loopback(_handler(model, answer)) as url:
        yield url


def good_logprobs(index: int, piece: str) -> dict:
    """Well-formed logprobs of one chunk: one token (the chunk's text), two alternatives."""
    return {"tokens": [piece], "token_logprobs": [-0.25], "top_logprobs": [{piece: -0.25, "x": -2.0}],
            "text_offset": [0]}
