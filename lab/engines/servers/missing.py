"""A server that died because its Python environment lacks a package: one line naming the package.

vLLM imports a model's processors (and their dependencies, e.g. torchvision for Qwen3.5 and Gemma-4
multimodal checkpoints) at start; when one is missing the server exits with an 80-line traceback.
The patterns that find the package in a log are data (missing_packages.yaml).
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

PATTERNS_FILE = Path(__file__).with_name("missing_packages.yaml")


@functools.lru_cache(maxsize=1)
def _table() -> tuple[list[re.Pattern], dict[str, str]]:
    data = yaml.safe_load(PATTERNS_FILE.read_text(encoding="utf-8")) or {}
    return [re.compile(p) for p in data.get("patterns") or []], {str(k): str(v) for k, v in (data.get("pypi_names") or {}).items()}


def missing_package(lines: list[str]) -> str | None:
    """The package a server's log says is missing (its PyPI name, lower-cased), or None."""
    patterns, names = _table()
    for pattern in patterns:
        for line in lines:
            found = pattern.search(line)
            if found:
                module = found.group("package").split(".")[0]
                return names.get(module, module).lower()
    return None


# the last line of a Python traceback: `OSError: Can't load image processor for …`, `ValueError: …`
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)): (?P<message>.+)$")
MAX_REASON = 300


def last_exception(lines: list[str]) -> str | None:
    """The last `XError: message` line a server's log ends its traceback with (one line, cut to 300
    characters), or None when the log has none."""
    for line in reversed(lines):
        found = _EXCEPTION_LINE.match(line.strip())
        if found:
            text = f"{found.group(1)}: {found.group('message').strip()}"
            return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"
    return None
