"""The engine contract stays explicit (DESIGN §4): `lab.engines.common.EngineBase` declares every member a
caller may use, each with a default, and the kind's traits as class attributes; the registry derives from
the classes. Read with `ast` over lab/ (imports inside functions count, nothing is run):

- no `getattr`/`hasattr` on an engine (an object whose name contains "engine", or `self` inside an engine
  class): callers use the declared attributes directly;
- every attribute read on an engine outside lab/engines/ is a member of EngineBase (or of the concrete
  engine class the module imports by name, where it works with that kind by design);
- no comparison of a kind (or an engine option) with a kind's literal outside lab/engines/, and no list of
  kinds there: the class's traits answer such questions;
- every registered class declares its kind and usage itself, and each trait is a bool on it."""
from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from lab.engines.common import EngineBase
from lab.engines.registry import ENGINE_CLASSES, ENGINE_KINDS, engine_class, engine_kinds
from tests.paths import REPO

LAB = REPO / "lab"
ENGINES = LAB / "engines"
KINDS = frozenset(ENGINE_KINDS)
TRAITS = ("answers_from_data", "answers_reference", "stored_run", "takes_preset", "takes_target", "managed",
          "scores_reference", "holds_memory_share")
ENGINE_NAME = re.compile(r"engine|pool\.get\(", re.IGNORECASE)  # `ctx.pool.get(name)` is an engine too


def lab_files(outside_engines: bool = False) -> list[Path]:
    files = sorted(LAB.rglob("*.py"))
    return [f for f in files if not (outside_engines and ENGINES in f.parents)]


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return f"{shown}:{node.lineno}: {ast.unparse(node)[:100]}"


def engine_class_names() -> set[str]:
    """Names of EngineBase and every class of lab/ that derives from it (by the names of their bases)."""
    bases: dict[str, set[str]] = {}
    for path in lab_files():
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(ast.unparse(b).split(".")[-1] for b in node.bases)
    names = {"EngineBase"}
    while True:
        more = {name for name, of in bases.items() if of & names} - names
        if not more:
            return names
        names |= more


def on_engine(call: ast.Call, in_engine_class: bool) -> bool:
    """Whether a getattr/hasattr call reads an engine."""
    if not call.args:
        return False
    target = ast.unparse(call.args[0])
    return bool(ENGINE_NAME.search(target)) or (in_engine_class and target == "self")


def attribute_guesses(path: Path, engine_classes: set[str]) -> list[str]:
    found = []

    def visit(node: ast.AST, in_engine_class: bool) -> None:
        if isinstance(node, ast.ClassDef):
            in_engine_class = node.name in engine_classes
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                and on_engine(node, in_engine_class)):
            found.append(where(path, node))
        for child in ast.iter_child_nodes(node):
            visit(child, in_engine_class)

    visit(parsed(path), False)
    return found


def test_no_getattr_or_hasattr_on_an_engine_in_lab():
    classes = engine_class_names()
    assert {"StoredEngine", "ManagedEngine", "VLLMServerEngine"} <= classes  # the scan sees the subclasses
    guesses = [hit for path in lab_files() for hit in attribute_guesses(path, classes)]
    assert not guesses, "read the engine's declared attributes (lab.engines.common.EngineBase) directly:\n" + "\n".join(guesses)


def members(cls: type) -> set[str]:
    """What an instance of `cls` has: its class's names and every `self.X =` of its classes in lab/engines."""
    names = set(dir(cls))
    for klass in cls.__mro__:
        if not klass.__module__.startswith("lab.engines"):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                  and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return names


def concrete_imports(tree: ast.Module) -> list[type]:
    """The engine classes a module imports by name (it works with that kind by design)."""
    import importlib

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lab.engines"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                value = getattr(module, alias.name, None)
                if isinstance(value, type) and issubclass(value, EngineBase) and value is not EngineBase:
                    found.append(value)
    return found


ENGINE_VALUE = re.compile(r"(^|\.)engine$")


def test_callers_read_only_what_the_engine_type_declares():
    base = members(EngineBase)
    unknown = []
    for path in lab_files(outside_engines=True):
        tree = parsed(path)
        allowed = set(base).union(*(members(cls) for cls in concrete_imports(tree)))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and ENGINE_VALUE.search(ast.unparse(node.value))
                    and node.attr not in allowed):
                unknown.append(where(path, node))
    assert not unknown, "declare these on EngineBase (with a default) or read them another way:\n" + "\n".join(unknown)


def kind_literals(node: ast.AST) -> set[str]:
    """The engine kinds written as string literals in `node` (a constant, or a tuple/list/set of them)."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return {e.value for e in elements if isinstance(e, ast.Constant) and e.value in KINDS}


def kind_tests(path: Path) -> list[str]:
    """Comparisons of a kind (or an engine option) with a kind's literal, and lists of kinds, in `path`."""
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names_a_kind = any(re.search(r"kind|engine", ast.unparse(o), re.IGNORECASE) for o in operands
                               if not isinstance(o, ast.Constant))
            if names_a_kind and any(kind_literals(o) for o in operands):
                found.append(where(path, node))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(kind_literals(node)) > 1:
            found.append(where(path, node))  # ("reference", "stored"): a list of kinds
    return found


def test_no_kind_literal_tests_or_kind_lists_outside_the_engines_room():
    found = [hit for path in lab_files(outside_engines=True) for hit in kind_tests(path)]
    assert not found, "ask the engine class's traits (lab.engines.registry.engine_class(kind)):\n" + "\n".join(found)


def test_the_scan_catches_what_it_forbids(tmp_path):
    """The checks above are not vacuous: each flags a file written the old way."""
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        PROMPT_FREE_KINDS = frozenset({"reference", "stored"})

        def f(entry, engine):
            if entry.kind == "stored" or engine.kind in ("reference", "stored"):
                return getattr(entry.engine, "path", None)
            return hasattr(engine, "score_reference") or getattr(ctx.pool.get("a"), "rows", {})
    """))
    assert len(attribute_guesses(bad, set())) == 3
    hits = kind_tests(bad)
    assert len(hits) == 4, hits  # the frozenset, the two comparisons and the tuple inside the second


@pytest.mark.parametrize("cls", ENGINE_CLASSES, ids=lambda cls: cls.kind)
def test_every_registered_class_declares_its_kind_usage_and_traits(cls):
    assert "kind" in vars(cls) and "usage" in vars(cls), f"{cls.__name__} declares its own kind and usage"
    assert cls.usage == cls.kind or cls.usage.startswith(f"{cls.kind}:")
    for trait in TRAITS:
        assert isinstance(getattr(cls, trait), bool), f"{cls.__name__}.{trait}"
    assert cls.overlong_prompt in ("reject", "shorten", "truncate") or isinstance(
        vars(cls).get("overlong_prompt"), property)
    assert engine_class(cls.kind) is cls


def test_the_registry_derives_from_the_classes():
    assert engine_kinds() == {cls.kind: cls.usage for cls in ENGINE_CLASSES}
    assert list(ENGINE_KINDS) == [cls.kind for cls in ENGINE_CLASSES]
    assert engine_class("no-such-kind") is EngineBase  # every trait at its default
    data = {cls.kind for cls in ENGINE_CLASSES if cls.answers_from_data}
    assert data == {"reference", "stored"}  # one definition of "answers from data", read from the classes
    assert {cls.kind for cls in ENGINE_CLASSES if cls.takes_preset} == {"transformers", "vllm", "transformers-serve"}


def test_the_engine_type_is_one_class():
    import lab.engines
    import lab.engines.base

    assert not hasattr(lab.engines.base, "Engine") and "Engine" not in lab.engines.__all__
    assert all(issubclass(cls, EngineBase) for cls in ENGINE_CLASSES)
