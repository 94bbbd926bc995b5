"""SDK exceptions as one-line messages that name the endpoint, and whether another try may help."""
from __future__ import annotations

import json
from dataclasses import dataclass

RETRY_STATUS = {408, 409, 429}  # plus every 5xx


@dataclass
class Failure:
    """A failed attempt: the message for the user, whether to try again (maybe on another
    replica), whether the replica did not answer at all, and the HTTP status when it answered."""

    message: str
    retryable: bool
    unreachable: bool = False
    status: int | None = None
    server_message: str = ""


def server_message(exc: BaseException) -> str:
    """The server's own words from an SDK error: `error.message`, `detail`, `message`, or the text."""
    body = getattr(exc, "body", None)
    if body is None and getattr(exc, "response", None) is not None:
        try:
            body = exc.response.json()
        except (ValueError, json.JSONDecodeError, AttributeError):
            body = getattr(exc.response, "text", "")
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            body = error["message"]
        else:
            body = next((body[k] for k in ("detail", "message", "error") if body.get(k)), body)
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    return " ".join(str(text).split())[:400] or str(exc)[:400]


def classify(exc: BaseException, url: str, model: str, timeout: float) -> Failure:
    """What an exception raised while requesting or streaming from `url` means for the user."""
    import openai  # here, not at the top: a CLI run of stored or reference engines never loads the SDK (0.8 s)

    if isinstance(exc, openai.APITimeoutError):
        return Failure(f"request to {url} timed out after {timeout:g} s", True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return Failure(f"endpoint {url} unreachable ({type(cause).__name__}: {cause})", True, unreachable=True)
    if isinstance(exc, openai.APIStatusError):
        status, said = exc.status_code, server_message(exc)
        if status >= 500 or status in RETRY_STATUS:
            return Failure(f"server error {status} from {url}: {said}", True, status=status, server_message=said)
        if status == 404:
            return Failure(f"404 from {url}: model '{model}' is not served there (or no /v1/completions route): {said}",
                           False, status=status, server_message=said)
        if status in (401, 403):
            return Failure(f"{url} refused the credentials ({status}): {said}; set api_key= or $OPENAI_API_KEY",
                           False, status=status, server_message=said)
        return Failure(f"server rejected the request ({status}): {said}", False, status=status, server_message=said)
    if isinstance(exc, openai.APIError):  # an error event inside the stream
        return Failure(f"server error during generation at {url}: {server_message(exc)}", True)
    return Failure(f"{type(exc).__name__} from {url}: {exc}", False)
