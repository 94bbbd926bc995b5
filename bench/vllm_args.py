"""vLLM's offline `LLM(...)` arguments from a lab server's `vllm serve` command line (the benchmarks give both
sides the same engine)."""
from __future__ import annotations

SERVER_ONLY = {"host", "port", "served_model_name", "stream_interval", "lora_modules"}  # the API server's, not LLM(...)'s


def engine_arguments(argv: list[str]) -> dict:
    """`LLM(...)`'s keyword arguments from a `vllm serve MODEL --flag value …` command line (server-only
    flags left out; `--no-X` is X=False, a bare `--X` is X=True)."""
    out: dict = {}
    rest = argv[3:]
    i = 0
    while i < len(rest):
        flag = rest[i][2:]
        has_value = i + 1 < len(rest) and not rest[i + 1].startswith("--")
        value: object = rest[i + 1] if has_value else not flag.startswith("no-")
        key = (flag[3:] if flag.startswith("no-") and not has_value else flag).replace("-", "_")
        if isinstance(value, str):
            value = number(value)
        if key not in SERVER_ONLY:
            out[key] = value
        i += 2 if has_value else 1
    return out


def number(text: str) -> object:
    """`8192` -> 8192, `0.2367` -> 0.2367, anything else as written."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text
