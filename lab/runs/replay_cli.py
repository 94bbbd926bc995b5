"""`python -m lab replay`: replay steps on one or more engines and write one result file each."""
from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Callable

from lab.runs.claims import RunNameTaken, TakenFn, check_run_name
from lab.runs.options import RunOptions, SamplingAsked
from lab.settings import Settings
from lab.tb2lite import CORRECTED, REPLAY_MODES, SCORER_NAMES


def _number(kind: type, low: float | None = None, high: float | None = None, low_open: bool = False):
    """An argparse type: a finite `kind` number within [low, high] (or (low, high] with `low_open`)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        too_low = low is not None and (value <= low if low_open else value < low)
        if value != value or value in (float("inf"), float("-inf")) or too_low or (high is not None and value > high):
            bounds = f"{'>' if low_open else '>='} {low}" + (f" and <= {high}" if high is not None else "")
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replay", help="replay .jsonl, a datasets source or a URL; default: $LAB_REPLAY, else the cached download "
                             "(`python -m lab data download`)")
    parser.add_argument("--engine", action="append", required=True, metavar="SPEC",
                        help="reference | stored:PATH | transformers:MODEL | vllm:MODEL_OR_PRESET | "
                             "transformers-serve:MODEL | openai:BASE_URL#MODEL | a preset name (repeatable); "
                             "vllm: and transformers-serve: start their server, run, and stop it")
    parser.add_argument("--out", default=None, help="output folder (default: results/runs)")
    parser.add_argument("--mode", choices=list(REPLAY_MODES), default=CORRECTED,
                        help="corrected: the 303-step rule (drop invalid/empty refs); all: every turn")
    parser.add_argument("--scorer", choices=list(SCORER_NAMES), default=CORRECTED,
                        help="scoring rules: corrected (default) or legacy (the old numbers, e.g. empty vs empty = 1.0)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run from its checkpoint")
    parser.add_argument("--tasks", nargs="*", default=None, help="only these task ids")
    parser.add_argument("--limit", type=_number(int, 0), default=None, help="only the first N steps")
    parser.add_argument("--lenient", action="store_true", help="skip malformed replay lines instead of stopping")
    parser.add_argument("--name", default=None, help="run name (file stem); default: the engine's name and kind "
                        "(e.g. checkpoint-3-vllm); a run is never replaced: a taken default name becomes NAME-2 …, "
                        "a taken --name is refused")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a finished or interrupted run of the same name (never done otherwise)")
    parser.add_argument("--chunk-size", type=_number(int, 1), default=16, help="steps per generate call (checkpoint granularity)")
    parser.add_argument("--max-tokens", type=_number(int, 1), default=None, metavar="N",
                        help="new tokens per answer (default: the preset's or the engine's, else 1024)")
    parser.add_argument("--temperature", type=_number(float, 0), default=None, metavar="T",
                        help="sampling temperature >= 0; 0 is greedy (default: the preset's or the engine's, else 0)")
    parser.add_argument("--top-p", type=_number(float, 0, 1, low_open=True), default=None, metavar="P",
                        help="nucleus sampling, 0 < P <= 1 (default: the preset's or the engine's, else 1)")
    parser.add_argument("--max-model-len", type=_number(int, 1), default=None, help="context guard limit (default: engine's)")
    parser.add_argument("--samples", type=_number(int, 1), default=1, metavar="N",
                        help="answers per step (seeds S, S+1, …); the per-step fields stay sample 0's, each step "
                             "gains `samples`, the aggregate mean_f1_over_samples, f1_std_mean and pass_at_k")
    parser.add_argument("--seed", type=_number(int, 0), default=None, metavar="S", help="sampling seed (of sample 0; default 0 "
                        "with --samples)")
    parser.add_argument("--pass-threshold", type=_number(float, 0, 1), default=None, metavar="F1",
                        help="a sample passes when its F1 is at least this (pass@k; default 0.5)")
    parser.add_argument("--allow-raw-fallback", action="store_true",
                        help="run even if some prompts fall back to raw text (such runs are not rank-eligible)")


def run_options(args: argparse.Namespace) -> RunOptions:
    """The run options a command's arguments ask for: replay's (`add_arguments`, whose dests are RunOptions'
    field names), or the part score-reference and sweep take of them (what a command lacks keeps its default).
    The one place a parsed Namespace becomes RunOptions; nothing past the CLI sees the Namespace."""
    given = vars(args)
    asked = SamplingAsked(**{f.name: given[f.name] for f in fields(SamplingAsked) if f.name in given})
    chosen = {f.name: given[f.name] for f in fields(RunOptions) if f.name in given and f.name != "sampling"}
    if chosen.get("tasks") is not None:
        chosen["tasks"] = tuple(chosen["tasks"])
    return RunOptions(**chosen, sampling=asked)


def note(line: str) -> None:
    """A run name that was taken, and the name the run got instead."""
    print(f"note: {line}", file=sys.stderr)


def run(args: argparse.Namespace, *, import_run: Callable[[Settings, Path], str] | None = None,
        stored_names: Callable[[Settings], TakenFn | None] | None = None) -> int:
    """Replay; a run written to the lab's own runs folder goes into the store through `import_run`, and its
    name is not one a run in the store was read from (`stored_names`; both passed in by `lab.cli`: the store
    is a layer above the runs)."""
    from lab.runs.cli_engines import CliEngines
    from lab.runs.legacy_guard import legacy_run_problem
    from lab.runs.meter import ticking
    from lab.runs.options import ReplaySource, replay_config, replay_settings, select_steps
    from lab.runs.replay import check_run_name_length, replay, run_file_name
    from lab.runs.step_bar import LIVE_EVERY_S, StepBar

    from lab.runs.samples_cli import check_sample_args, samples_line, warn_if_greedy

    options = run_options(args)
    check_sample_args(options)
    settings = replay_settings(options.replay)
    replay_set, steps = select_steps(options, settings)
    out_dir = Path(options.out) if options.out else settings.runs_dir
    own_folder = Path(out_dir).resolve() == Path(settings.runs_dir).resolve()  # the lab's own runs folder
    taken = stored_names(settings) if stored_names is not None and own_folder else None
    name = options.name if len(args.engine) == 1 else None
    check_run_name_length(name)  # an input error: exit 2, before any engine loads
    engines = CliEngines(args.engine, check=lambda engine: check_run_name(
        out_dir, run_file_name(engine, name), resume=options.resume, overwrite=options.overwrite,
        explicit=bool(name), taken=taken))
    for spec, engine in engines:
        problem = legacy_run_problem(engine, options.mode, options.scorer)
        if problem is not None:
            engine.close()
            engines.fail(spec, problem)
            continue
        if engine.load_time_sec is None:
            engine.load_time_sec = engines.load_seconds
        config = replay_config(options, engine, ReplaySource.of(replay_set), out_dir, run_name=name,
                               name_given=bool(name), taken=taken, notify=note)
        warn_if_greedy(spec, config)
        bar = StepBar(engine.name, len(steps))
        try:
            with ticking(bar.draw, LIVE_EVERY_S):
                path = replay(engine, steps, config, progress=bar.progress, meter=bar.meter)
        except RunNameTaken as exc:  # taken since the check above (another process claimed it meanwhile)
            engines.fail(spec, exc)
            continue
        finally:
            bar.close()
            engine.close()
        from lab.resultfiles.files import read_result_file

        agg = read_result_file(path)["aggregate"]
        print(f"{spec}: {agg['steps']} steps, score {100 * agg['avg_command_f1']:.2f} "
              f"(F1 {agg['avg_command_f1']:.4f}, valid JSON {agg['valid_json_pct']}%) -> {path}")
        if "pass_at_k" in agg:
            print(samples_line(agg))
        if import_run is not None and own_folder:
            print(import_run(settings, path))
    return 1 if engines.failures else 0
