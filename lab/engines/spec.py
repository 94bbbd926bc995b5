"""Parse engine SPEC strings: `KIND:TARGET?key=value&key=value`.

Examples::

    reference
    stored:results/runs/qwen.json
    transformers:/models/tiny?device=cpu&lora=/adapters/a1&contract=bash-block
    vllm:qwen35-2b-sft?gpu_memory_utilization=0.45
    openai:http://127.0.0.1:8000/v1#Qwen/Qwen3.5-2B?concurrency=8
    qwen35-2b-sft                       (a bare preset name from assets/models.yaml)

Options come after the first `?`, separated by `&`; values are strings (engines convert
them: `true/false`, numbers). The `#` of an `openai:` target belongs to the target.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from lab.booleans import parse_bool
from lab.errors import EngineSpecError


@dataclass(frozen=True)
class ParsedSpec:
    """A SPEC string split into its kind, its target (path, model, URL#model) and options."""

    kind: str
    target: str
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""


def option_key(key: str) -> str:
    """One spelling per option name: case, `-`/`_` and leading dashes do not matter
    (`--Trust-Remote-Code` -> `trust_remote_code`)."""
    return key.strip().lstrip("-").strip().lower().replace("-", "_")


def parse_options(text: str, spec: str) -> dict[str, str]:
    """`a=1&b=x` -> {"a": "1", "b": "x"}; a bare key means "true". Names are normalised
    (`option_key`) before anything checks them."""
    options: dict[str, str] = {}
    for part in filter(None, text.split("&")):
        key, sep, value = part.partition("=")
        key = option_key(key)
        if not key:
            raise EngineSpecError(f"engine spec '{spec}': empty option name in '?{text}'")
        options[key] = value.strip() if sep else "true"
    return options


def split_spec(spec: str) -> ParsedSpec:
    """Split `KIND:TARGET?OPTIONS` without deciding whether KIND exists (the registry does)."""
    text = (spec or "").strip()
    if not text:
        raise EngineSpecError("empty engine spec: give e.g. 'reference', 'stored:PATH' or a preset name")
    head, _, opts = text.partition("?")
    kind, sep, target = head.partition(":")
    if not sep:
        return ParsedSpec(kind=kind.strip(), target="", options=parse_options(opts, text), text=text)
    return ParsedSpec(kind=kind.strip(), target=target.strip(), options=parse_options(opts, text), text=text)


def as_bool(value: object, name: str = "option") -> bool:
    """Read `true/false/1/0/yes/no/on/off` (or a bool) as a bool."""
    parsed = parse_bool(value)
    if parsed is not None:
        return parsed
    raise EngineSpecError(f"option '{name}' must be true or false, got '{value}'")


def as_number(value: object, name: str, kind: type = float) -> float | int:
    """Read an int or float option with a message naming it (a finite one: nan and inf are refused)."""
    what = "an integer" if kind is int else "a number"
    try:
        number = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise EngineSpecError(f"option '{name}' must be {what}, got '{str(value)[:40]}'") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise EngineSpecError(f"option '{name}' must be a finite number, got '{str(value)[:40]}'")
    return number


def short_name(model: str) -> str:
    """Last path segment of a model id or path (`org/Model-1B` -> `Model-1B`), spaces -> '-'."""
    cleaned = str(model).rstrip("/\\")
    segment = cleaned.replace("\\", "/").rsplit("/", 1)[-1] or cleaned
    return segment.replace(" ", "-")
