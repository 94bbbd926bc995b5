"""One HTTP stack: the lab's own HTTP (downloads, health checks, the LoRA endpoints, probes) goes through
httpx alone, and the code that drives the `openai` SDK hands it none of httpx's objects (the SDK runs on an
HTTP library of its own, whose types differ: an httpx.Timeout once made every served engine fail to load).
Read from the source of lab/, imports inside functions included."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

OTHER_PACKAGES = {"requests", "urllib3", "aiohttp", "httpx2", "pycurl"}
OTHER_MODULES = {"urllib.request", "http.client"}


def imported(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def other_http(name: str) -> bool:
    """An HTTP client library other than httpx (or one of the standard library's)."""
    return name.split(".")[0] in OTHER_PACKAGES or any(name == m or name.startswith(m + ".") for m in OTHER_MODULES)


def lab_files() -> list[Path]:
    return sorted((REPO / "lab").rglob("*.py"))


def test_the_labs_own_http_is_httpx_alone():
    other = {str(p.relative_to(REPO)): sorted(filter(other_http, imported(p))) for p in lab_files()}
    assert not {k: v for k, v in other.items() if v}
    assert any("httpx" in imported(p) for p in lab_files()), "no file of lab/ imports httpx: the wrong tree?"


def test_code_that_drives_the_sdk_imports_no_http_library():
    users = [p for p in lab_files() if "openai" in imported(p)]
    assert users, "no file of lab/ imports openai: this test reads the wrong tree"
    mixed = {str(p.relative_to(REPO)): sorted(n for n in imported(p) if n.split(".")[0] == "httpx" or other_http(n))
             for p in users}
    assert not {k: v for k, v in mixed.items() if v}
