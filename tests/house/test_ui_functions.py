"""The UI's functions stay short: a tab builder lays out components and wires module-level handlers (which
tests call without a browser), so no function in lab/ui/ grows past MAX_LINES lines (its decorators and
docstring included). Read with `ast`, nested functions counted inside the function that holds them."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

UI = REPO / "lab" / "ui"
MAX_LINES = 80


def long_functions(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'path:line name (n lines)' for every function under `root` longer than `limit` lines, longest first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - start + 1
                if lines > limit:
                    found.append((lines, f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)"))
    return [text for _, text in sorted(found, reverse=True)]


def test_no_function_in_the_ui_is_longer_than_the_limit():
    assert long_functions(UI) == [], f"split into module-level handlers and layout helpers (at most {MAX_LINES} lines)"


def test_the_check_sees_a_long_function_and_its_decorators(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES - 2))
    (tmp_path / "tab.py").write_text(f"@decorated\ndef fits():\n{body}\n\n\n@decorated\ndef builder():\n{body}\n    x = 0\n")
    assert [line.split(" ", 1)[1] for line in long_functions(tmp_path)] == [f"builder ({MAX_LINES + 1} lines)"]
