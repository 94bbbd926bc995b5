"""`python -m lab …`: a thin dispatcher; each sub-command lives beside the code it drives."""
from __future__ import annotations

import argparse
import importlib
import sys

from lab.errors import LabError

# sub-command name -> module exposing `add_arguments(parser)` and `run(args) -> int`
COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("lab.runs.replay_cli", "replay TB2-lite steps on engines and write result files"),
    "rescore": ("lab.runs.rescore", "recompute per-step metrics and the aggregate of a result file"),
    "results": ("lab.store.cli", "query and import the lab's DuckDB store"),
    "data": ("lab.data.cli", "download the public replay file or summarize a replay source"),
    "sweep": ("lab.sweep.cli", "replay many engines or shards of one on a Ray cluster (--ray ADDRESS | local)"),
    "whatif": ("lab.whatif.cli", "list, replay on other engines and export saved what-if edits"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """Parser whose only fully built sub-command is the one named in `argv` (imports stay lazy)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description="TB2-lite comparison lab")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module)
        if name == chosen:
            importlib.import_module(module).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    from lab.engines.servers import install_exit_handlers

    install_exit_handlers()  # managed model servers stop with the command
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output path that cannot be written, a disk that is full, …
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


