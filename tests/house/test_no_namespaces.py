"""Issue 53: run options have one type (lab.runs.options.RunOptions). An `argparse.Namespace` is made by a CLI's
parser and turned into typed options there; no module past the CLI makes one (or a `types.SimpleNamespace`) to
borrow the parser's schema or to stand in for a typed object (an engine, the options of a run)."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

LAB = REPO / "lab"
NAMESPACES = {"Namespace", "SimpleNamespace"}


def is_parser_module(path: Path, tree: ast.Module) -> bool:
    """A CLI's parser module: `lab/cli.py`, a `cli.py` or `*_cli.py`, or a module that adds a parser's arguments."""
    if path.name == "cli.py" or path.stem.endswith("_cli"):
        return True
    return any(isinstance(node, ast.FunctionDef) and node.name.startswith("add_") and node.name.endswith("arguments")
               for node in tree.body)


def namespace_calls(tree: ast.Module) -> list[int]:
    """Lines that make an argparse.Namespace or a types.SimpleNamespace, however the name was imported."""
    local = set(NAMESPACES)  # `from argparse import Namespace as Options` makes `Options` one too
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("argparse", "types"):
            local |= {alias.asname or alias.name for alias in node.names if alias.name in NAMESPACES}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in local) or (isinstance(func, ast.Attribute)
                                                                 and func.attr in NAMESPACES):
            lines.append(node.lineno)
    return lines


def test_no_namespace_is_made_outside_a_clis_parser():
    found = []
    for path in sorted(LAB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if is_parser_module(path, tree):
            continue
        found += [f"{path.relative_to(REPO)}:{line}" for line in namespace_calls(tree)]
    assert not found, f"a Namespace made outside a CLI's parser (build lab.runs.options.RunOptions instead): {found}"


def test_the_check_finds_what_it_looks_for():
    made = ast.parse("import argparse\nfrom types import SimpleNamespace as NS\n"
                     "a = argparse.Namespace(mode='all')\nb = NS(kind='x')\nc = types.SimpleNamespace()\n")
    assert namespace_calls(made) == [3, 4, 5]
    typed = ast.parse("from lab.runs.options import RunOptions\noptions = RunOptions(mode='all')\n")
    assert namespace_calls(typed) == []
    assert is_parser_module(Path("lab/runs/replay_cli.py"), typed)
    assert not is_parser_module(Path("lab/sweep/options.py"), typed)
    assert is_parser_module(Path("lab/runs/rescore.py"), ast.parse("def add_arguments(parser):\n    pass\n"))
