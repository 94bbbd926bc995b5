"""`python -m lab …`: a thin dispatcher; each sub-command lives beside the code it drives."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any, Callable

from lab.errors import LabError, os_error_line
from lab.settings import Settings

# sub-command name -> module exposing `add_arguments(parser)` and `run(args) -> int`
COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("lab.runs.replay_cli", "replay TB2-lite steps on engines and write result files"),
    "score-reference": ("lab.runs.reference_cli", "the reference answer's log-likelihood per step under an engine "
                                                  "(teacher forcing, no generation)"),
    "rescore": ("lab.runs.rescore", "recompute per-step metrics and the aggregate of a result file"),
    "results": ("lab.store.cli", "query and import the lab's DuckDB store"),
    "data": ("lab.data.cli", "download the public replay file or summarize a replay source"),
    "sweep": ("lab.sweep.cli", "replay many engines or shards of one on a Ray cluster (--ray ADDRESS | local)"),
    "whatif": ("lab.whatif.cli", "list, replay on other engines and export saved what-if edits"),
    "equiv": ("lab.scoring.equiv.cli", "equiv_f1 (not the published score) of one pair of command-unit lists, as JSON"),
    "compare": ("lab.analysis.compare_cli", "is the candidate really better than the baseline? each metric's difference "
                                         "with its 95 % interval; with --max-drop a CI gate (exit 1 when worse)"),
    "plan": ("lab.analysis.plan_cli", "how big a difference two runs' comparison can see, where its variance comes from, "
                                   "and what more answers per step or more tasks would detect"),
    "demo": ("lab.runs.demo_cli", "a SYNTHETIC pair of runs with a known difference on a synthetic replay shaped "
                                  "like TB2-lite, imported into the store: a comparison with intervals, offline"),
    "training": ("lab.training.cli", "the evaluations of a training run made with TB2LiteCallback: finish what it "
                                     "left, or show them"),
}
# commands that may start model servers: only these install the exit handlers that stop them (the others never
# load the servers' machinery, httpx included)
STARTS_SERVERS = {"replay", "sweep", "whatif"}
# sub-commands that live in a higher layer than their parent command's module: parent -> name -> (module, help);
# the parent's `add_arguments` returns its sub-parsers so they can be added here
NESTED: dict[str, dict[str, tuple[str, str]]] = {
    "data": {"published": ("lab.published.cli", "the public per-step result files: list, fetch, import")},
}


def _import_run(settings: Settings, path: str | Path) -> str:
    """Import a replayed run into the store, then refresh its triage flags (both sit above the runs)."""
    from lab.store.autoimport import import_new_run
    from lab.triage import refresh_step_flags

    return import_new_run(settings, path, after_import=refresh_step_flags)


def _stored_names(settings: Settings) -> Callable[[Path], str | None] | None:
    """Where the store holds a run whose result file path a new run must not take (lab.runs.claims)."""
    from lab.store.autoimport import store_run_names

    return store_run_names(settings)


def _published_path(ref: str, settings: Settings) -> str | None:
    """The stored path of the published run `ref` names (the store finds runs by it; published sits above it)."""
    from lab.published.fetch import published_path

    return published_path(ref, settings)


# what a command of a lower layer gets passed in from this layer: command -> keyword -> function
def _export_runs(*args: Any, **kwargs: Any) -> Any:
    """Stored runs as a dataset folder with their intervals (the analysis sits above the store)."""
    from lab.analysis.dataset_export import export_runs

    return export_runs(*args, **kwargs)


def _show_series(store: Any, series: str) -> int:
    """A series' judgement, printed (the analysis sits above the store)."""
    from lab.analysis.series_judgement import print_series

    return print_series(store, series)


PASSED_IN: dict[str, dict[str, Callable[..., Any]]] = {
    "replay": {"import_run": _import_run, "stored_names": _stored_names},
    "score-reference": {"import_run": _import_run, "stored_names": _stored_names},
    "compare": {"published_path": _published_path},
    "plan": {"published_path": _published_path},
    "demo": {"import_run": _import_run},
    "results": {"published_path": _published_path, "export_runs": _export_runs, "show_series": _show_series},
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """Parser whose only fully built sub-command is the one named in `argv` (imports stay lazy)."""
    parser = argparse.ArgumentParser(prog="python -m lab", description="TB2-lite comparison lab")
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module, help_text) in COMMANDS.items():
        # argparse %-formats help (not a description without %(prog)): a literal % is written %%
        sp = sub.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        sp.set_defaults(_module=module)
        if name == chosen:
            nested = importlib.import_module(module).add_arguments(sp)
            for sub_name, (sub_module, sub_help) in NESTED.get(name, {}).items():
                ssp = nested.add_parser(sub_name, help=sub_help.replace("%", "%%"))
                ssp.set_defaults(_module=sub_module)  # the sub-command's module runs it
                importlib.import_module(sub_module).add_arguments(ssp)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    from lab.sweep.leftovers import remove_orphans

    remove_orphans()  # folders of sweep actors killed outright on this machine (their driver killed)
    if args.command in STARTS_SERVERS:
        from lab.engines.servers import install_exit_handlers

        install_exit_handlers()  # managed model servers stop with the command
    try:
        return int(importlib.import_module(args._module).run(args, **PASSED_IN.get(args.command, {})) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output path that cannot be written, a disk that is full, …
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return 2


