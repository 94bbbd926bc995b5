"""`python -m lab score-reference`: the reference answer's likelihood under an engine, for a whole replay."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from lab.errors import LabError
from lab.runs.claims import TakenFn
from lab.settings import Settings
from lab.tb2lite import CORRECTED, REPLAY_MODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.runs.replay_cli import _number

    parser.add_argument("--engine", action="append", required=True, metavar="SPEC",
                        help="transformers:MODEL | vllm:MODEL_OR_PRESET | openai:BASE_URL#MODEL (a vLLM server) | a "
                             "preset (repeatable): the engines whose likelihood of each reference answer is measured")
    parser.add_argument("--replay", help="replay .jsonl, a datasets source or a URL; default: $LAB_REPLAY, else the "
                                         "cached download")
    parser.add_argument("--out", default=None, help="output folder (default: results/runs); files are NAME.reference.json")
    parser.add_argument("--mode", choices=list(REPLAY_MODES), default=CORRECTED,
                        help="corrected: the 303 published steps; all: every turn")
    parser.add_argument("--tasks", nargs="*", default=None, help="only these task ids")
    parser.add_argument("--limit", type=_number(int, 0), default=None, help="only the first N steps")
    parser.add_argument("--name", default=None, help="run name (file stem before .reference.json); default: the "
                        "engine's name and kind; a taken default name becomes NAME-2 …, a taken --name is refused")
    parser.add_argument("--overwrite", action="store_true", help="replace a run of the same name (never done otherwise)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run from its checkpoint")
    parser.add_argument("--lenient", action="store_true", help="skip malformed replay lines instead of stopping")


def run(args: argparse.Namespace, *, import_run: Callable[[Settings, Path], str] | None = None,
        stored_names: Callable[[Settings], TakenFn | None] | None = None) -> int:
    """Score the references on each engine in turn; a file written to the lab's runs folder is imported (and its
    name is not one a run in the store was read from: `stored_names`, as for replay)."""
    from tqdm import tqdm

    from lab.runs.claims import check_run_name
    from lab.runs.cli_engines import CliEngines
    from lab.runs.reference_run import SUFFIX, ReferenceConfig, score_reference_run
    from lab.runs.replay import check_run_name_length, run_file_name
    from lab.runs.options import replay_settings, select_steps
    from lab.runs.replay_cli import note, run_options
    from lab import jsontext

    options = run_options(args)
    settings = replay_settings(options.replay)
    replay_set, steps = select_steps(options, settings)
    out_dir = Path(options.out) if options.out else settings.runs_dir
    own_folder = Path(out_dir).resolve() == Path(settings.runs_dir).resolve()
    taken = stored_names(settings) if stored_names is not None and own_folder else None
    name = options.name if len(args.engine) == 1 else None
    check_run_name_length(name)  # an input error: exit 2, before any engine loads
    engines = CliEngines(args.engine, check=lambda engine: check_run_name(
        out_dir, run_file_name(engine, name), suffix=SUFFIX, resume=options.resume, overwrite=options.overwrite,
        explicit=bool(name), taken=taken))
    for spec, engine in engines:
        config = ReferenceConfig(out_dir=out_dir, run_name=name, name_given=bool(name), overwrite=options.overwrite,
                                 taken=taken, notify=note, resume=options.resume, replay_fingerprint=replay_set.fingerprint,
                                 selection=options.selection, eval_path=str(replay_set.path))
        bar = tqdm(total=len(steps), desc=engine.name, unit="step", file=sys.stderr)

        def progress(done: int, total: int, bar=bar) -> None:
            bar.n = done
            bar.refresh()

        try:
            path = score_reference_run(engine, steps, config, progress=progress)
        except LabError as exc:
            engines.fail(spec, exc)
            continue
        finally:
            bar.close()
            engine.close()
        agg = jsontext.loads(path.read_bytes())["aggregate"]
        nll = agg["ref_nll_per_token"]
        print(f"{spec}: {agg['steps_scored']} of {agg['steps']} steps scored, {agg['ref_tokens']} reference tokens, "
              f"NLL per token {'n/a' if nll is None else f'{nll:.4f}'}"
              + (f" ({agg['steps_failed']} failed: see per_step[].error)" if agg["steps_failed"] else "")
              + f" -> {path}")
        if import_run is not None and own_folder:
            print(import_run(settings, path))
    return 1 if engines.failures else 0
