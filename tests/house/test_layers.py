"""The package stays layered (DESIGN §3): no import cycle between files of lab/ and no import from a lower
layer to a higher one. Imports are read with `ast`, imports inside functions count, imports under
`if TYPE_CHECKING:` do not. The layer table is data (lab/layers.yaml), checked against DESIGN's own table.
Inside lab/ui the rooms (lab/layers.yaml's `ui:`) are layered too: shell < each tab package < the assembly
(lab/ui/app.py), and no tab package imports another."""
from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest
import yaml

from tests.paths import REPO

DESIGN = REPO.parent / "shared" / "DESIGN.md"
LAYERS = REPO / "lab" / "layers.yaml"


# -- the layer table ------------------------------------------------------------------------------
def design_rows(text: str) -> dict[int, str]:
    """Layer number -> the rooms cell of DESIGN §3's "Layers, lowest first" table."""
    section = text.split("\n## 3.", 1)[1].split("\n## ", 1)[0]
    table = section.split("**Layers, lowest first**", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.match(r"(\d+)\b", cells[0]) if len(cells) == 2 else None
        if match:
            rows[int(match.group(1))] = cells[1]
    return rows


def named_rooms(cell: str) -> set[str]:
    """The rooms a DESIGN cell names in backticks: `data/` -> data, `cli.py` -> cli."""
    return {re.sub(r"(/|\.py)$", "", name) for name in re.findall(r"`([^`]+)`", cell)}


def load_layers(path: Path = LAYERS) -> dict[str, int]:
    """Room (top-level package or module of lab/) -> its layer, from lab/layers.yaml."""
    table = yaml.safe_load(path.read_text(encoding="utf-8"))
    rank = {}
    for row in table["layers"]:
        for room in [*row["rooms"], *row.get("described", {}), *row.get("same_as", {})]:
            rank[room] = row["layer"]
    for extra in table.get("beyond_design", []):
        rank[extra["room"]] = extra["layer"]
    return rank


# -- the imports ----------------------------------------------------------------------------------
def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every module name an import statement (or `import_module("literal")`) of the file can load."""
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                   for stmt in node.body for n in ast.walk(stmt)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the file's package, up level - 1
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package at `root` it imports (a name resolves to its longest module)."""
    files = {module_name(root, p): p for p in sorted(root.rglob("*.py"))}
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py"):
            while name and name not in files:
                name = name.rpartition(".")[0]
            # a package's __init__ importing its own modules is how packages work, not a cycle
            if name and name != module and not (path.name == "__init__.py" and name.startswith(module + ".")):
                targets.add(name)
        graph[module] = targets
    return graph


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def problems(root: Path, rank: dict[str, int]) -> list[str]:
    """Every cycle and upward import of the package at `root`, as lines (empty when it is layered)."""
    graph = import_graph(root)
    found = [f"{m}: no layer for '{room_of(m)}' in lab/layers.yaml" for m in graph
             if room_of(m) is not None and room_of(m) not in rank]
    found += [f"up: {a} (layer {rank[room_of(a)]}) imports {b} (layer {rank[room_of(b)]})"
              for a, targets in sorted(graph.items()) for b in sorted(targets)
              if room_of(a) in rank and room_of(b) in rank and rank[room_of(a)] < rank[room_of(b)]]
    remaining = {m: set(t) for m, t in graph.items()}
    while True:  # report every cycle: take one out and look again
        try:
            TopologicalSorter(remaining).prepare()
            return found
        except CycleError as exc:
            cycle = exc.args[1]
            found.append("cycle: " + " -> ".join(cycle))
            remaining[cycle[1]].discard(cycle[0])  # graphlib lists the cycle backwards


# -- the tests ------------------------------------------------------------------------------------
@pytest.mark.skipif(not DESIGN.exists(), reason=f"{DESIGN} missing")
def test_the_layer_table_is_designs():
    rows = design_rows(DESIGN.read_text(encoding="utf-8"))
    table = yaml.safe_load(LAYERS.read_text(encoding="utf-8"))["layers"]
    assert [r["layer"] for r in table] == sorted(rows), "lab/layers.yaml and DESIGN §3 have different layers"
    for row in table:
        cell = rows[row["layer"]]
        assert set(row["rooms"]) == named_rooms(cell), f"layer {row['layer']}: DESIGN names {sorted(named_rooms(cell))}"
        for package, words in row.get("described", {}).items():
            assert words.lower() in cell.lower(), f"layer {row['layer']}: DESIGN does not describe {package} as {words!r}"
        for module, room in row.get("same_as", {}).items():
            assert room in row["rooms"], f"layer {row['layer']}: {module} sits with {room}, which is not in the row"


@pytest.mark.skipif(not DESIGN.exists(), reason=f"{DESIGN} missing")
def test_rooms_beyond_designs_table_have_one_home_and_a_reason():
    """A room DESIGN does not name sits at one of DESIGN's layers, is not also in a row, and says why."""
    rows = design_rows(DESIGN.read_text(encoding="utf-8"))
    table = yaml.safe_load(LAYERS.read_text(encoding="utf-8"))
    in_rows = {room for row in table["layers"]
               for room in [*row["rooms"], *row.get("described", {}), *row.get("same_as", {})]}
    for extra in table.get("beyond_design", []):
        assert extra["layer"] in rows, f"{extra['room']}: layer {extra['layer']} is not one of DESIGN's"
        assert extra["room"] not in in_rows, f"{extra['room']} is in a row of the table already"
        assert extra["room"] not in named_rooms(" ".join(rows.values())), f"DESIGN names {extra['room']}: put it in its row"
        assert len(str(extra.get("why", "")).split()) >= 5, f"{extra['room']}: say why it sits at layer {extra['layer']}"


def test_every_room_of_lab_has_a_layer():
    rooms = {p.stem for p in (REPO / "lab").iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert rooms - set(load_layers()) == set()


def test_lab_has_no_cycle_and_no_upward_import():
    assert problems(REPO / "lab", load_layers()) == []


def test_the_check_sees_cycles_upward_and_lazy_imports(tmp_path):
    """A small package with each kind of mistake (and one import the rules allow) is judged right."""
    pkg = tmp_path / "lab"
    files = {
        "__init__.py": "",
        "low/__init__.py": "from lab.low.a import thing\n",
        "low/a.py": "def thing():\n    from lab.high.b import other  # lazy, still an import\n    return other\n",
        "low/c.py": "from . import d\n",
        "low/d.py": "from .c import x\nx = 1\n",
        "low/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lab.high.b import other\n",
        "high/__init__.py": "",
        "high/b.py": "import importlib\nother = importlib.import_module('lab.low.c')\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    found = problems(pkg, {"low": 1, "high": 2})
    assert [f for f in found if f.startswith("up:")] == ["up: lab.low.a (layer 1) imports lab.high.b (layer 2)"]
    cycles = [f for f in found if f.startswith("cycle:")]
    assert len(cycles) == 1 and set(cycles[0][len("cycle: "):].split(" -> ")) == {"lab.low.c", "lab.low.d"}
    assert not any("typed" in f for f in found)  # imports for type checkers only are not imports
    assert "lab.high.b: no layer for 'high' in lab/layers.yaml" in problems(pkg, {"low": 1})


# -- the rooms of lab/ui --------------------------------------------------------------------------
def load_ui_rooms(path: Path = LAYERS) -> dict:
    """The `ui:` section of lab/layers.yaml: shell, tabs and assembly of lab/ui."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))["ui"]


def ui_room_of(module: str) -> str | None:
    """lab.ui.compare.step_view -> compare, lab.ui.app -> app, lab.ui -> None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["lab", "ui"] else None


def ui_problems(root: Path, rooms: dict) -> list[str]:
    """Every import inside lab/ui that breaks shell < tabs < assembly, and every module of lab/ui in no room."""
    shell, tabs, assembly = rooms["shell"], set(rooms["tabs"]), rooms["assembly"]
    graph = import_graph(root)
    found = [f"{m}: in no room of lab/ui (shell, a tab or the assembly)" for m in graph
             if ui_room_of(m) not in (None, shell, assembly, *tabs)]
    for a, targets in sorted(graph.items()):
        here = ui_room_of(a)
        for b in sorted(targets):
            there = ui_room_of(b)
            if here in (None, assembly) or there in (None, here, shell):
                continue
            if here == shell:
                found.append(f"shell imports a tab or the assembly: {a} imports {b}")
            elif there == assembly:
                found.append(f"tab imports the assembly: {a} imports {b}")
            else:
                found.append(f"tab imports another tab: {a} imports {b}")
    return found


def test_the_rooms_of_ui_are_packages():
    rooms = load_ui_rooms()
    ui = REPO / "lab" / "ui"
    for room in [rooms["shell"], *rooms["tabs"]]:
        assert (ui / room / "__init__.py").exists(), f"lab/ui/{room}/ is not a package"
    assert (ui / f"{rooms['assembly']}.py").exists()
    found = {p.name for p in ui.iterdir() if not p.name.startswith(("_", "."))}
    assert found == {rooms["shell"], *rooms["tabs"], f"{rooms['assembly']}.py"}, "a file of lab/ui outside its rooms"


def test_no_tab_imports_another_tab():
    assert ui_problems(REPO / "lab", load_ui_rooms()) == []


def test_the_ui_check_sees_each_mistake(tmp_path):
    """A small lab/ui with each kind of mistake (and the imports the rules allow) is judged right."""
    pkg = tmp_path / "lab"
    files = {
        "__init__.py": "", "ui/__init__.py": "", "ui/stray.py": "",
        "ui/app.py": "from lab.ui.one.a import a\nfrom lab.ui.two.b import b\n",
        "ui/shell/__init__.py": "", "ui/shell/s.py": "def f():\n    from lab.ui.one.a import a  # lazy, still an import\n",
        "ui/one/__init__.py": "", "ui/one/a.py": "from lab.ui.shell.s import f\nfrom lab.ui.one.c import c\na = 1\n",
        "ui/one/c.py": "import importlib\nc = importlib.import_module('lab.ui.two.b')\n",
        "ui/two/__init__.py": "", "ui/two/b.py": "def b():\n    from lab.ui.app import build\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    assert sorted(ui_problems(pkg, {"shell": "shell", "tabs": ["one", "two"], "assembly": "app"})) == [
        "lab.ui.stray: in no room of lab/ui (shell, a tab or the assembly)",
        "shell imports a tab or the assembly: lab.ui.shell.s imports lab.ui.one.a",
        "tab imports another tab: lab.ui.one.c imports lab.ui.two.b",
        "tab imports the assembly: lab.ui.two.b imports lab.ui.app",
    ]


def room_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Rooms that import each other, directly or round a circle (rooms of one layer included)."""
    rooms: dict[str, set[str]] = {}
    for a, targets in graph.items():
        for b in targets:
            if room_of(a) and room_of(b) and room_of(a) != room_of(b):
                rooms.setdefault(room_of(a), set()).add(room_of(b))
    found = []
    while True:
        try:
            TopologicalSorter(rooms).prepare()
            return found
        except CycleError as exc:
            cycle = exc.args[1]
            found.append(" -> ".join(cycle))
            rooms[cycle[1]].discard(cycle[0])


def test_rooms_depend_on_each_other_one_way():
    """Two rooms of one layer (store and published) may share it, but only one imports the other."""
    assert room_cycles(import_graph(REPO / "lab")) == []


def test_a_circle_of_rooms_is_seen():
    graph = {"lab.store.a": {"lab.published.b"}, "lab.published.b": {"lab.store.c"}, "lab.store.c": set()}
    assert room_cycles(graph) in (["store -> published -> store"], ["published -> store -> published"])
