"""The workspace is a typed contract (lab/workspace.py, `LabContext`): every field has its real type (no `Any`,
and each name resolves, TYPE_CHECKING imports included), nothing outside lab/workspace.py touches a private
member of it (`ctx._x`, its store lock: the store is used through `with ctx.store_session() as store:`), and
nothing hangs state on it that the class does not declare (`ctx.x = …` or `setattr(ctx, "x", …)` of a field it
lacks). Read with `ast` over every file of lab/: a context is a name `ctx`, `context` or `lab_ctx`, or an
attribute `….ctx`."""
from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

from tests.paths import REPO

LAB = REPO / "lab"
WORKSPACE = LAB / "workspace.py"
CONTEXT_NAMES = {"ctx", "context", "lab_ctx"}


def _is_context(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in CONTEXT_NAMES) or (isinstance(node, ast.Attribute)
                                                                          and node.attr == "ctx")


def _type_checking_names() -> dict[str, object]:
    """What lab/workspace.py imports under `if TYPE_CHECKING:`, imported for real (a stale name fails here)."""
    names: dict[str, object] = {}
    for node in ast.parse(WORKSPACE.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            exec(compile(ast.Module(body=node.body, type_ignores=[]), str(WORKSPACE), "exec"), names)
    names.pop("__builtins__", None)
    return names


def _holds_any(hint: object) -> bool:
    return hint is typing.Any or any(_holds_any(arg) for arg in typing.get_args(hint))


def loose_fields() -> list[str]:
    """'field: its type' for every LabContext field typed with `Any` somewhere in it."""
    from lab.workspace import LabContext

    hints = typing.get_type_hints(LabContext, localns=_type_checking_names())
    return [f"{f.name}: {hints[f.name]}" for f in dataclasses.fields(LabContext) if _holds_any(hints[f.name])]


def private_uses(root: Path, declared: set[str], skip: Path | None = None) -> list[str]:
    """'path:line code' for every use, in the files under `root` but `skip`, of a context's private member or the
    store's lock (getattr and hasattr included), and every assignment, setattr or delattr of a context's member
    not in `declared`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            bad = False
            if isinstance(node, ast.Attribute):
                bad = node.attr == "_store_lock" or (_is_context(node.value) and node.attr.startswith("_"))
                bad = bad or (isinstance(node.ctx, (ast.Store, ast.Del)) and _is_context(node.value)
                              and node.attr not in declared)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) > 1
                  and node.func.id in ("setattr", "delattr", "getattr", "hasattr") and _is_context(node.args[0])):
                name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
                writes = node.func.id in ("setattr", "delattr")
                bad = not isinstance(name, str) or name.startswith("_") or (writes and name not in declared)
            if bad:
                found.append((path.relative_to(root.parent), node.lineno, node.col_offset, ast.unparse(node)))
    return [f"{path}:{line} {code}" for path, line, _, code in sorted(found)]


def declared_members() -> set[str]:
    from lab.workspace import LabContext

    return {f.name for f in dataclasses.fields(LabContext) if not f.name.startswith("_")}


def test_every_field_of_the_workspace_has_its_real_type():
    assert loose_fields() == []


def test_nothing_outside_the_workspace_touches_its_private_members_or_hangs_state_on_it():
    found = private_uses(LAB, declared_members(), skip=WORKSPACE)
    assert found == [], "use `with ctx.store_session() as store:`, and declare a tab's state as a LabContext field"


def test_the_check_sees_private_uses_and_undeclared_state(tmp_path):
    (tmp_path / "tab.py").write_text(
        "def f(ctx, self):\n"
        "    with ctx._store_lock:\n"              # the store's lock
        "        pass\n"
        "    self.ctx._keys = None\n"              # a private member through an attribute
        "    ctx.sample_cache = {}\n"              # undeclared state
        "    setattr(ctx, 'extra', 1)\n"           # undeclared state, by setattr
        "    getattr(context, '_keys', None)\n"   # a private member, by getattr
        "    getattr(context, name, None)\n"      # a member whose name the code does not say
        "    with ctx.store_session() as store:\n"  # the public door: fine
        "        store.query('SELECT 1')\n"
        "    ctx.inflight = ctx.inflight or 1\n"   # a declared field: fine
        "    getattr(ctx, 'inflight', None)\n"     # fine
        "    other.x = 1\n")                       # not a context: fine
    found = [line.split(" ", 1)[1] for line in private_uses(tmp_path, {"inflight", "store"})]
    assert found == ["ctx._store_lock", "self.ctx._keys", "ctx.sample_cache", "setattr(ctx, 'extra', 1)",
                     "getattr(context, '_keys', None)", "getattr(context, name, None)"]
