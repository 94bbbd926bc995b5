"""`python -m lab whatif …`: list, replay (on other engines) and export saved what-if edits.

Imports neither Gradio nor CUDA: engines load only for `replay`, the way `python -m lab replay` does.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lab.errors import LabError
from lab.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help="DuckDB file (default: <results>/lab.duckdb or $LAB_DB)")
    parser.add_argument("--results", default=None, help="results folder of the store (default: results/)")
    sub = parser.add_subparsers(dest="whatif_command", required=True)
    p = sub.add_parser("list", help="saved what-if edits with their answers, as CSV")
    p.add_argument("--step", default=None, help="only edits of this step (e.g. task-000/3)")
    p = sub.add_parser("replay", help="answer saved edits with other engines (results go to the what-if tables)")
    p.add_argument("edit_ids", nargs="+", metavar="EDIT_ID", help="saved edits by id (see `python -m lab whatif list`)")
    p.add_argument("--engine", action="append", required=True, metavar="SPEC", help="engine SPEC (repeatable)")
    p.add_argument("--replay", default=None, help="replay source holding the steps (default: $LAB_REPLAY / cache)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="new tokens per answer (default: the engine's, else 1024)")
    p = sub.add_parser("export", help="write edits and their answers as JSON lines")
    p.add_argument("-o", "--out", default="-", help="output file (default: stdout)")
    p.add_argument("--edit", action="append", default=None, metavar="EDIT_ID", help="only these edits")


def _settings(args: argparse.Namespace) -> Settings:
    kwargs = {}
    if args.results:
        kwargs["results_dir"] = args.results
    if args.db:
        kwargs["db_path"] = args.db
    return Settings(**kwargs)


def run(args: argparse.Namespace) -> int:
    from lab.store.opening import open_store
    from lab.whatif.store import DuckWhatIfStore

    settings = _settings(args)
    with open_store(settings, sync=False) as store:
        keeper = DuckWhatIfStore(store)
        command = {"list": _list, "replay": _replay, "export": _export}[args.whatif_command]
        return command(keeper, args, settings)


def _list(keeper, args: argparse.Namespace, settings: Settings) -> int:
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(["edit_id", "step_key", "fields", "note", "engine", "command_f1", "answers_from_data", "created_at"])
    for whatif in keeper.edits(args.step):
        results = keeper.results(whatif.edit_id) or [None]
        for r in results:
            writer.writerow([whatif.edit_id, whatif.step_key, " ".join(whatif.fields), whatif.note,
                             r.engine_spec if r else "", "" if r is None or r.f1 is None else f"{r.f1:.4f}",
                             "" if r is None else r.answers_from_data,
                             "" if r is None else r.created_at.isoformat(timespec="seconds")])
    return 0


def _replay(keeper, args: argparse.Namespace, settings: Settings) -> int:
    from lab.data import load_replay
    from lab.engines.base import Sampling
    from lab.runs.cli_engines import CliEngines
    from lab.runs.pipeline import run_steps
    from lab.whatif.run import run_whatif

    whatifs = [keeper.get_edit(edit_id) for edit_id in args.edit_ids]
    replay_set = load_replay(args.replay, mode="all", settings=settings)
    steps = []
    for whatif in whatifs:
        if whatif.step_key not in replay_set.by_key:
            raise LabError(f"{replay_set.path}: no step {whatif.step_key} (what-if {whatif.edit_id}); pass --replay")
        steps.append(replay_set.by_key[whatif.step_key])
    failures = 0  # what-ifs answered with an error
    engines = CliEngines(args.engine)
    for spec, engine in engines:
        try:
            if args.max_tokens is not None:
                engine.default_sampling = Sampling(**{**engine.default_sampling.to_dict(), "max_tokens": args.max_tokens})
            for whatif, step in zip(whatifs, steps):
                original = run_steps(engine, [step])[0].metrics.f1
                result = run_whatif(engine, step, whatif, spec=spec, name=engine.name)
                keeper.save_result(result)
                shown = "error: " + result.error if result.error else f"what-if F1 {result.f1:.4f}"
                print(f"{whatif.edit_id} {step.key} on {spec}: original F1 {original:.4f} -> {shown}")
                failures += bool(result.error)
        finally:
            engine.close()
    return 1 if failures or engines.failures else 0


def _export(keeper, args: argparse.Namespace, settings: Settings) -> int:
    from lab.whatif.store import export_jsonl

    if args.out == "-":
        n = export_jsonl(keeper, sys.stdout, args.edit)
    else:
        path = Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as out:
            n = export_jsonl(keeper, out, args.edit)
    print(f"exported {n} what-if edit(s)" + ("" if args.out == "-" else f" to {args.out}"), file=sys.stderr)
    return 0
