"""One home per setting: the lab's own environment variables (LAB_*) are read only in lab/settings.py; every
other file asks it. Read with `ast`: a read is `os.environ.get(KEY)`, `os.environ[KEY]`, `os.getenv(KEY)` or
`KEY in os.environ`, where KEY is a LAB_* string, a module constant holding one, or a name the check cannot
resolve (a variable: it may hold a LAB_* name). Writing the environment (a child process's) is not reading."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

LAB = REPO / "lab"
HOME = LAB / "settings.py"


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


def _constants(tree: ast.Module) -> dict[str, object]:
    """Module-level NAME = "text" (or a dict of texts) assignments."""
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _keys_read(tree: ast.Module) -> list[tuple[int, ast.AST]]:
    """(line, key expression) of every read of the environment by key."""
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and (
                    (func.attr in ("get", "pop") and _is_environ(func.value))
                    or (func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os")):
                reads.append((node.lineno, node.args[0]))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            reads.append((node.lineno, node.slice))
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            reads.append((node.lineno, node.left))
    return reads


def _names(key: ast.AST, constants: dict[str, object]) -> list[str] | None:
    """The variable names `key` can stand for, or None when it cannot be told."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return [key.value]
    if isinstance(key, ast.Name) and isinstance(constants.get(key.id), str):
        return [constants[key.id]]
    if isinstance(key, ast.Subscript) and isinstance(key.value, ast.Name) and isinstance(constants.get(key.value.id), dict):
        return [str(v) for v in constants[key.value.id].values()]
    return None


def lab_reads(path: Path) -> list[str]:
    """'file:line KEY' for each read of a LAB_* variable (or of a key that cannot be told) in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    constants = _constants(tree)
    found = []
    for line, key in _keys_read(tree):
        names = _names(key, constants)
        if names is None or any(n.startswith("LAB_") for n in names):
            found.append(f"{path.relative_to(path.parents[1])}:{line} {ast.unparse(key)}")
    return found


def test_lab_settings_are_read_only_in_settings_py():
    found = [hit for path in sorted(LAB.rglob("*.py")) if path != HOME for hit in lab_reads(path)]
    assert found == [], "read these through lab/settings.py"


def test_the_check_sees_each_way_of_reading(tmp_path):
    package = tmp_path / "lab"
    package.mkdir()
    source = package / "mod.py"
    source.write_text(
        'import os\nKEY = "LAB_X"\nLIMITS = {"a": "LAB_A"}\nOTHER = "PATH"\n'
        'a = os.environ.get("LAB_ONE")\nb = os.getenv(KEY)\nc = os.environ[LIMITS["a"]]\nd = "LAB_TWO" in os.environ\n'
        'e = os.environ.get(OTHER)\nf = os.environ.get(name)\nos.environ["LAB_SET"] = "1"\ng = {**os.environ}\n'
    )
    assert [hit.split(" ", 1)[0] for hit in lab_reads(source)] == [f"lab/mod.py:{n}" for n in (5, 6, 7, 8, 10)]
