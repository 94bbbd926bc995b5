"""What a model is, from its config.json (a local folder, or the Hub cache: never the network): its
architecture and the context its config gives. Engines add what they run it with (dtype, context,
server flags) in `EngineInfo`."""
from __future__ import annotations

import json
from pathlib import Path

from lab.engines.context import config_context_length

MAX_CONFIG_BYTES = 4 * 2**20


def _config_file(model: str) -> Path | None:
    folder = Path(model).expanduser()
    if folder.is_dir():
        found = folder / "config.json"
        return found if found.is_file() else None
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(model, "config.json")
    except Exception:  # noqa: BLE001 - not a Hub id, or no cache: nothing known
        return None
    return Path(cached) if isinstance(cached, str) else None


def read_config(model: str | None) -> dict | None:
    """`model`'s config.json as a mapping (a local folder, or the Hub cache), None when unknown or unreadable."""
    path = _config_file(model) if model else None
    if path is None:
        return None
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:  # a model's config is a few KB: anything huge is not one
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return config if isinstance(config, dict) else None


def config_kinds(config: dict) -> tuple[list[str], list[str]]:
    """(model types, architectures) a config.json names: its `model_type` and its text config's (a multimodal
    checkpoint's language model), and its `architectures`; only text values."""
    text = config.get("text_config")
    types = [config.get("model_type"), text.get("model_type") if isinstance(text, dict) else None]
    archs = config.get("architectures")
    return ([t for t in types if isinstance(t, str) and t],
            [a for a in archs if isinstance(a, str) and a] if isinstance(archs, list) else [])


def config_facts(model: str | None) -> tuple[str | None, int | None]:
    """(architecture, context length from the config) of `model`, each None where unknown."""
    config = read_config(model)
    if config is None:
        return None, None
    archs = config.get("architectures")
    arch = str(archs[0]) if isinstance(archs, list) and archs and archs[0] else None
    context = config_context_length(config)  # where assets/context.yaml says a config keeps it
    return arch, context[0] if context else None


def server_flags(argv: list[str], model: str) -> list[str]:
    """A server's command line after its executable, subcommand and model: the flags it was given."""
    args = list(argv[1:])
    if model in args:
        args = args[args.index(model) + 1:]
    return args
