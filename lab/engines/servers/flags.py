"""SPEC options -> server command-line flags (`max_num_seqs=128` -> `--max-num-seqs 128`)."""
from __future__ import annotations

from lab.booleans import parse_bool


def flag_name(key: str) -> str:
    """`max_num_seqs` -> `--max-num-seqs`."""
    return "--" + key.strip().lstrip("-").replace("_", "-")


def setting_flags(key: str, value: object) -> list[str]:
    """One setting as flags: booleans become `--x` / `--no-x`, None nothing, others `--x VALUE`."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [flag_name(key)] if value else ["--no-" + flag_name(key)[2:]]
    as_bool = parse_bool(value) if isinstance(value, str) and value.lower() in {"true", "false"} else None
    if as_bool is not None:
        return setting_flags(key, as_bool)
    return [flag_name(key), str(value)]


def option_flags(options: dict) -> list[str]:
    """All pass-through options as flags, in the order given."""
    argv: list[str] = []
    for key, value in options.items():
        argv += setting_flags(key, value)
    return argv
