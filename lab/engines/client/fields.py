"""The fields of a `/v1/completions` request: the full sampling every time, never the server's defaults.

The harness's own sampling is sent in full (temperature, top_p, max_tokens, repetition_penalty,
top_k, min_p, seed when set, stop when set), because `vllm serve` fills every field a request
leaves out from the model's `generation_config.json`, which the harness never does. The body goes
out as built here, through the SDK's client: fields the OpenAI API does not define travel beside
those it does. Some servers refuse fields they do not know (`transformers serve` answers 422
"Unexpected fields in the request: {...}"); the lab then stops sending just those to that server,
which is harmless at their neutral values and an error otherwise (the request would silently run
with other sampling).
"""
from __future__ import annotations

import json
import re

from lab.engines.base import Sampling

SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens", "repetition_penalty", "top_k", "min_p", "seed", "stop")
# What the lab asks for beyond sampling: usage in the last streamed chunk, generated token ids (vLLM).
PROTOCOL_FIELDS = {"stream_options": {"include_usage": True}, "return_token_ids": True}
# Fields a server may refuse; sending them without effect changes nothing when at these values.
NEUTRAL = {"repetition_penalty": (1.0,), "top_k": (0, -1), "min_p": (0.0,), "seed": (None,), "stop": (None,)}
# Asked for, never changing what is generated: a server that refuses it records no log-probabilities.
RECORDING_FIELDS = {"logprobs"}
REFUSABLE = set(NEUTRAL) | set(PROTOCOL_FIELDS) | RECORDING_FIELDS
# Words with which servers say a field is unknown (FastAPI/pydantic, transformers serve, others).
UNKNOWN_FIELD_WORDS = ("unexpected", "extra", "unknown", "unrecognized", "not permitted", "not allowed", "unsupported")


def sampling_fields(sampling: Sampling) -> dict:
    """The sampling part of a request, with every field the harness sets (seed/stop when given)."""
    fields: dict = {
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "max_tokens": int(sampling.max_tokens),
        "repetition_penalty": float(sampling.repetition_penalty),
        "top_k": int(sampling.top_k),
        "min_p": float(sampling.min_p),
    }
    if sampling.seed is not None:
        fields["seed"] = int(sampling.seed)
    if sampling.stop:
        fields["stop"] = list(sampling.stop)
    return fields


def is_neutral(name: str, value: object) -> bool:
    """True when leaving `name` out cannot change what is generated (protocol fields always)."""
    if name in PROTOCOL_FIELDS or name in RECORDING_FIELDS:
        return True
    if name == "top_k":
        return value is not None and int(value) <= 0
    return value in NEUTRAL.get(name, ())


def request_fields(sampling: Sampling, refused: dict[str, str], stream: bool = True,
                   logprobs: int = 0) -> tuple[dict, dict]:
    """(fields to send, fields left out because the server refuses them) for one request; `logprobs`
    alternatives per generated token are asked for when > 0."""
    wanted = sampling_fields(sampling)
    if stream:
        wanted.update(PROTOCOL_FIELDS)
    if logprobs > 0:
        wanted["logprobs"] = int(logprobs)
    sent = {k: v for k, v in wanted.items() if k not in refused}
    left_out = {k: v for k, v in wanted.items() if k in refused}
    return sent, left_out


def refused_fields(message: str, sent: set[str]) -> set[str]:
    """The refusable fields a server's 4xx message names as unknown (empty: another problem)."""
    lowered = message.lower()
    if not any(word in lowered for word in UNKNOWN_FIELD_WORDS):
        return set()
    return {name for name in sent & REFUSABLE if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message)}


def sent_sampling(fields: dict) -> dict:
    """The sampling fields of a request as recorded in a result file."""
    return {k: fields[k] for k in SAMPLING_FIELDS if k in fields}


# Carried inside `transformers serve`'s per-request `generation_config` (which it applies whole,
# instead of the model's generation_config.json with its `do_sample: false`), so a refusal of the
# plain field does not matter there.
GENERATION_CONFIG_CARRIES = ("repetition_penalty", "top_k", "min_p")


def generation_config_field(sampling: Sampling, base: dict) -> str:
    """`transformers serve`'s `generation_config` request field: the model's own generation config
    (`base`: eos/pad ids …) with the request's full sampling, so temperature > 0 really samples."""
    config = dict(base)
    sample = float(sampling.temperature) > 0
    config.update({
        "do_sample": sample,
        "temperature": float(sampling.temperature) if sample else None,
        "top_p": float(sampling.top_p) if sample else None,
        "top_k": int(sampling.top_k) if sample and sampling.top_k and int(sampling.top_k) > 0 else None,
        "min_p": float(sampling.min_p) if sample and sampling.min_p else None,
        "repetition_penalty": float(sampling.repetition_penalty),
        "max_new_tokens": int(sampling.max_tokens),
    })
    config.pop("max_length", None)
    return json.dumps({k: v for k, v in config.items() if v is not None}, sort_keys=True)
