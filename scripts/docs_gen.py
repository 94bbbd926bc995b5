"""The documentation's reference parts, generated from the code and data they describe, so none can drift.

A page asks for one with a marker line, `<!-- generated: NAME -->`; MkDocs runs this file as a hook
(mkdocs.yml: `hooks:`) and puts the generated Markdown in its place on every build. A marker with an
unknown name fails the build. Run it by hand to see one part:

    python scripts/docs_gen.py NAME        # cli, app-cli, spec-kinds, spec-options, presets, layers,
                                           # rooms, subrooms, benchmarks, gpu-proof, environment,
                                           # bench-NAME (one benchmark's figures, e.g. bench-first-look)
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]

MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)
BENCH_RESULTS = ROOT / "bench" / "results"
GPU_RECORDS = ROOT / "bench" / "gpu" / "records"
USAGE_WIDTH = "100"  # argparse wraps usage lines to $COLUMNS


def cell(text: str, literal: bool = False) -> str:
    """Text for one Markdown table cell: one line, `|` and HTML escaped (`literal`: backticks and `*` too, for
    text that is data rather than Markdown, such as a benchmark's labels)."""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return text.replace("`", "&#96;").replace("*", "&#42;") if literal else text


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


# --- the command line: every argparse parser of app.py and `python -m lab` -------------------------------------

def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _argument_rows(parser: argparse.ArgumentParser) -> list[list[str]]:
    fmt = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            args = fmt._format_args(action, action.dest.upper()) if action.nargs != 0 else ""
            name = ", ".join(action.option_strings) + (f" {args}" if args else "")
        else:
            name = fmt._format_args(action, fmt._get_default_metavar_for_positional(action))
        text = fmt._expand_help(action) if action.help else ""
        if action.choices and action.metavar and not isinstance(action.choices, dict) and "%(choices)" not in text:
            text += f" (one of: {', '.join(map(str, action.choices))})"
        rows.append([f"`{name}`", cell(text)])
    return rows


def _command(parser: argparse.ArgumentParser, title: str, level: int, help_text: str | None = None) -> list[str]:
    lines = [f"{'#' * level} {title}", ""]
    if parser.description or help_text:
        lines += [cell(parser.description or help_text), ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    rows = _argument_rows(parser)
    if rows:
        lines += [table(["argument", "what it does"], rows), ""]
    sub = _subparsers(parser)
    helps = {a.dest: (a.help or "").replace("%%", "%") for a in sub._choices_actions} if sub else {}  # as printed
    for name, child in (sub.choices.items() if sub else ()):
        lines += _command(child, f"{title} {name}", level + 1, helps.get(name))
    return lines


def _with_width(build: Callable[[], str]) -> str:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = USAGE_WIDTH
    try:
        return build()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def app_cli() -> str:
    """`python app.py`'s arguments."""
    import app

    return _with_width(lambda: "\n".join(_command(app.build_parser(), "python app.py", 2)))


def lab_cli() -> str:
    """Every `python -m lab` command and sub-command, from lab/cli.py's COMMANDS and their `add_arguments`."""
    from lab.cli import COMMANDS, build_parser

    def build() -> str:
        lines = []
        for name in COMMANDS:
            parser = build_parser([name])
            lines += _command(_subparsers(parser).choices[name], f"python -m lab {name}", 2)
        return "\n".join(lines)

    return _with_width(build)


# --- engines: kinds, SPEC options, presets --------------------------------------------------------------------

def _visitor_rule(rule: dict | None) -> str:
    """What a visitor of a public deployment may give for an option (lab/engines/visitor_options.yaml)."""
    if rule is None:
        return "owner only"
    kind = rule.get("type")
    if kind in ("number", "int"):
        return f"{rule['min']} to {rule['max']}"
    if kind == "enum":
        return " | ".join(str(v) for v in rule["values"])
    if kind == "text":
        return f"up to {rule['max_length']} characters"
    if kind == "path":
        return "a Hub id, or a path inside the data folders"
    if kind == "preset":
        return "a preset key"
    return str(kind)


def _visitor_options() -> dict:
    return yaml.safe_load((ROOT / "lab" / "engines" / "visitor_options.yaml").read_text(encoding="utf-8"))["options"]


def spec_kinds() -> str:
    """One row per engine kind: its SPEC and its class's first docstring line."""
    from lab.engines.registry import ENGINE_CLASSES

    rows = []
    for cls in ENGINE_CLASSES:
        doc = summary(cls.__doc__)
        rows.append([f"`{cls.usage}`", cell(doc), "yes" if cls.takes_preset else "no"])
    return table(["SPEC", "engine", "takes a preset"], rows)


def spec_options() -> str:
    """The options each kind declares (`OPTIONS`) and those every kind takes (`COMMON_OPTIONS`)."""
    from lab.engines.common import COMMON_OPTIONS
    from lab.engines.registry import ENGINE_CLASSES

    visitor = _visitor_options()
    parts = ["### Every kind", "",
             table(["option", "what it sets", "a visitor may give"],
                   [[f"`{k}`", cell(v), cell(_visitor_rule(visitor.get(k)))] for k, v in COMMON_OPTIONS.items()]), ""]
    for cls in ENGINE_CLASSES:
        parts += [f"### `{cls.usage}`", ""]
        if not cls.OPTIONS:
            parts += ["No options of its own.", ""]
            continue
        rows = [[f"`{k}`" if k != "*" else "any other", cell(v), cell(_visitor_rule(visitor.get(k)))]
                for k, v in cls.OPTIONS.items()]
        parts += [table(["option", "what it sets", "a visitor may give"], rows), ""]
    return "\n".join(parts)


def presets() -> str:
    """assets/models.yaml: each preset's model, kind, contract, sampling and engine settings."""
    from lab.engines.presets import load_presets

    rows = []
    for key, p in load_presets().items():
        sampling = f"T {p.sampling.temperature}, top_p {p.sampling.top_p}, max {p.sampling.max_tokens}"
        engine = ", ".join(f"{k} {v}" for k, v in p.engine.items())
        model = f"`{p.hf_id}`" + (f" + LoRA `{p.lora}`" if p.lora else "")
        rows.append([f"`{key}`", cell(p.display_name), model, p.kind, f"`{p.contract}`", cell(sampling), cell(engine)])
    return table(["preset", "name", "model", "kind", "contract", "sampling", "engine settings"], rows)


# --- architecture: lab/layers.yaml and each room's docstring --------------------------------------------------

def summary(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    match = re.search(r"(?<=\.)\s+(?=[A-Z`])", paragraph)
    return paragraph[: match.start()] if match else paragraph


def _room_file(room: str) -> Path | None:
    """lab/ROOM/__init__.py or lab/ROOM.py (app: app.py), None where this checkout has no such room."""
    candidates = [ROOT / "app.py"] if room == "app" else [ROOT / "lab" / room / "__init__.py", ROOT / "lab" / f"{room}.py"]
    return next((p for p in candidates if p.is_file()), None)


def _layers() -> dict:
    return yaml.safe_load((ROOT / "lab" / "layers.yaml").read_text(encoding="utf-8"))


def layers() -> str:
    """The layer table of lab/layers.yaml, lowest first."""
    data = _layers()
    beyond: dict[int, list[str]] = {}
    for item in data.get("beyond_design", []):
        beyond.setdefault(item["layer"], []).append(item["room"])
    rows = []
    for layer in data["layers"]:
        rooms = [f"`{r}`" for r in layer.get("rooms", [])]
        rooms += [f"`{r}` ({cell(words)})" for r, words in (layer.get("described") or {}).items()]
        rooms += [f"`{r}` (with `{other}`)" for r, other in (layer.get("same_as") or {}).items()]
        rooms += [f"`{r}`" for r in beyond.get(layer["layer"], [])]
        rows.append([str(layer["layer"]), ", ".join(rooms)])
    ui = data.get("ui") or {}
    text = table(["layer", "rooms of lab/"], rows)
    if ui:
        text += ("\n\nInside `ui` (layer 8), lowest first: the shell `lab/ui/"
                 f"{ui['shell']}/`, then the tab packages ({', '.join(f'`{t}`' for t in ui['tabs'])}), then the "
                 f"assembly `lab/ui/{ui['assembly']}.py`. A tab imports the shell and the layers below `ui`, never "
                 "another tab.")
    return text


def rooms() -> str:
    """Each room of lab/, its layer and what its docstring says it does."""
    data = _layers()
    layer_of: dict[str, int] = {}
    for layer in data["layers"]:
        for room in [*layer.get("rooms", []), *(layer.get("described") or {})]:
            layer_of[room] = layer["layer"]
    for item in data.get("beyond_design", []):
        layer_of[item["room"]] = item["layer"]
    rows = []
    for room, number in sorted(layer_of.items(), key=lambda x: (x[1], x[0])):
        path = _room_file(room)
        if path is None:
            continue
        name = str(path.parent.relative_to(ROOT)) + "/" if path.name == "__init__.py" else str(path.relative_to(ROOT))
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        rows.append([str(number), f"`{name}`", cell(summary(doc))])
    return table(["layer", "room", "what it does (its docstring)"], rows)


def subrooms() -> str:
    """The packages inside the rooms (lab/ROOM/PACKAGE/), each with its docstring's first sentence."""
    rows = []
    for init in sorted((ROOT / "lab").glob("*/*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        rows.append([f"`{init.parent.relative_to(ROOT)}/`", cell(summary(doc))])
    return table(["package", "what it does (its docstring)"], rows)


# --- environment variables: every LAB_* name the code reads ---------------------------------------------------

def environment() -> str:
    """Each `LAB_*` variable named in lab/ (its code and its data files) and app.py, with the files that name it."""
    seen: dict[str, set[str]] = {}
    files = [*sorted((ROOT / "lab").rglob("*.py")), *sorted((ROOT / "lab").rglob("*.yaml")), ROOT / "app.py"]
    for path in files:
        for name in set(re.findall(r"\bLAB_[A-Z0-9_]+\b", path.read_text(encoding="utf-8"))):
            seen.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    rows = [[f"`{name}`", ", ".join(f"`{f}`" for f in sorted(where))] for name, where in sorted(seen.items())]
    return table(["variable", "read in"], rows)


# --- benchmarks: bench/results/*.json (bench/record.py) and the GPU proof's records ---------------------------

def _bench_doc(name: str) -> tuple[str, str]:
    """(first docstring line, usage line) of bench/NAME.py."""
    path = ROOT / "bench" / f"{name}.py"
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = summary(doc) or name
    usage = next((line.strip() for line in doc.splitlines() if f"bench/{name}.py" in line and "python" in line), "")
    return first, usage.rstrip("\\ ") or f"python bench/{name}.py"


def number(value: float | int) -> str:
    """About four significant digits, thousands separated, never in scientific notation."""
    if isinstance(value, int) or value == 0:
        return f"{value:,}"
    decimals = max(0, 3 - math.floor(math.log10(abs(value))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _value(figure: dict) -> str:
    value = figure["value"]
    if value is None:
        return "—"
    unit = figure.get("unit") or ""
    return f"{number(value)} {cell(unit, literal=True)}".strip()


def _machine(box: dict) -> str:
    load = lambda x: " / ".join(f"{v:.2f}" for v in x) if x else "unknown"  # noqa: E731
    versions = ", ".join(f"{k} {v}" for k, v in box.get("packages", {}).items() if v)
    return (f"{box.get('cores')} cores ({box.get('cores_usable')} usable), {box.get('memory_gib')} GiB, "
            f"{box.get('processor')}; load average (1/5/15 min) {load(box.get('load_average_before'))} before, "
            f"{load(box.get('load_average_after'))} after; Python {box.get('python')}; {versions}")


def benchmark_names() -> list[str]:
    """Every benchmark: bench/bench_*.py."""
    return sorted(p.stem for p in (ROOT / "bench").glob("bench_*.py"))


def benchmark_figures(name: str, results: Path = BENCH_RESULTS) -> list[str]:
    """The last recorded figures of bench/NAME.py, its checks and machine (Markdown lines)."""
    path = results / f"{name}.json"
    if not path.is_file():
        return [f"No figures recorded yet: `{_bench_doc(name)[1]}` writes `bench/results/{name}.json`.", ""]
    data = json.loads(path.read_text(encoding="utf-8"))
    settings = ", ".join(f"{k} {v}" for k, v in data.get("settings", {}).items())
    parts = [f"Recorded by `{data['command']}`" + (f" with {cell(settings, literal=True)}" if settings else "") + ".", ""]
    rows = [[cell(f["label"], literal=True), _value(f), cell(f.get("note", ""), literal=True)] for f in data["figures"]]
    parts += [table(["figure", "value", "how"], rows), ""]
    if data.get("checks"):
        parts += ["Checks: " + "; ".join(f"{cell(c['label'], literal=True)}: **{'yes' if c['passed'] else 'NO'}**"
                                        + (f" ({cell(c['detail'], literal=True)})" if c.get("detail") else "")
                                        for c in data["checks"]) + ".", ""]
    return parts + [f"Machine: {cell(_machine(data['machine']))}.", ""]


def benchmarks(results: Path = BENCH_RESULTS) -> str:
    """One section per benchmark: what it measures, its command, and its last recorded figures and machine."""
    parts = []
    for name in benchmark_names():
        parts += [f"### {name}", "", cell(_bench_doc(name)[0]), "", *benchmark_figures(name, results)]
    return "\n".join(parts)


def one_benchmark(marker: str) -> Callable[[], str] | None:
    """`bench-first-look` -> the figures of bench/bench_first_look.py, for a page that quotes one benchmark."""
    name = marker.replace("-", "_")
    if not marker.startswith("bench-") or name not in benchmark_names():
        return None
    return lambda: "\n".join(benchmark_figures(name))


def gpu_proof() -> str:
    """The GPU proof's figures (bench/gpu/proof.py writes gpu_proof.json; its runs are kept in bench/gpu/records/)."""
    parts = []
    for path in sorted(GPU_RECORDS.glob("*/gpu_proof.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        meta, scenarios = data["meta"], data["scenarios"]
        gpu = meta.get("gpu", "").split(",")[0]
        parts += [f"**{cell(gpu)}**, {meta.get('steps')} steps, {meta.get('max_tokens')} new tokens a step, "
                  f"engines {', '.join(f'`{e}`' for e in meta.get('engines', []))}.", ""]
        start = scenarios.get("start", {}).get("engines", {})
        if start:
            parts += [table(["engine", "start to ready", "GPU share", "GPU memory"],
                            [[f"`{n}`", f"{e['load_s']:.0f} s", f"{e['gpu_memory_utilization']}",
                              f"{e['gpu_memory_mib'] / 1024:.1f} GiB"] for n, e in start.items() if e.get("load_s")]), ""]
        for scenario in ("together", "alone"):
            engines = scenarios.get(scenario, {}).get("engines", {})
            if not engines:
                continue
            rows = [[f"`{n}`", f"{e['steps']} of {e['of']}", f"{e['s_per_step']:.3f}", f"{e['ttft_p50_s']:.2f}",
                     f"{e['ttft_p95_s']:.2f}", "yes" if e.get("capped") else "no"] for n, e in engines.items()]
            title = "all three at once" if scenario == "together" else "each alone"
            parts += [f"Replay, {title}:", "",
                      table(["engine", "steps", "s/step", "TTFT p50 s", "TTFT p95 s", "stopped by its cap"], rows), ""]
        missing = [name for name in ("compare", "cli", "offline") if "error" in scenarios.get(name, {"error": 1})]
        if missing:
            parts += ["Not measured in that run: " + ", ".join(
                f"`{m}` ({cell(scenarios[m]['error'])})" if m in scenarios else f"`{m}` (not reached)" for m in missing)
                      + ".", ""]
    return "\n".join(parts) or "No GPU proof recorded yet."


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": lab_cli,
    "app-cli": app_cli,
    "spec-kinds": spec_kinds,
    "spec-options": spec_options,
    "presets": presets,
    "layers": layers,
    "rooms": rooms,
    "subrooms": subrooms,
    "environment": environment,
    "benchmarks": benchmarks,
    "gpu-proof": gpu_proof,
}


def expand(markdown: str) -> str:
    """Replace every `<!-- generated: NAME -->` line; an unknown NAME is a ValueError naming it."""
    if str(ROOT) not in sys.path:  # the generators import lab/ and app.py (MkDocs loads hooks from a path)
        sys.path.insert(0, str(ROOT))
    def one(match: re.Match) -> str:
        name = match.group(1)
        build = GENERATORS.get(name) or one_benchmark(name)
        if build is None:
            raise ValueError(f"unknown generated part '{name}' (known: {', '.join(GENERATORS)}, bench-NAME for "
                             "bench/bench_NAME.py)")
        return build().rstrip()

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:  # MkDocs hook
    from mkdocs.exceptions import PluginError

    try:
        return expand(markdown)
    except ValueError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted([*GENERATORS, *(n.replace("_", "-") for n in benchmark_names())]))
    args = parser.parse_args(argv)
    print(expand(f"<!-- generated: {args.name} -->"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
