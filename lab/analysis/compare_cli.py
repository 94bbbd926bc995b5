"""`python -m lab compare BASELINE CANDIDATE`: is the candidate really better (or worse) than the baseline?

Each run is a result file, a run of the lab's store (run id, display name or stored path) or a published
run (catalogue key or file name; fetched with `python -m lab data published fetch`). Prints each metric's
difference with its 95 % interval (a paired bootstrap over tasks, lab.analysis.run_pairs) and the settings the two
runs differ in (lab.resultfiles.run_settings).

Without --max-drop it is a look: exit 0 whatever it finds. With --max-drop it is a gate for CI jobs and
training pipelines: exit 1 when the candidate is worse than the baseline by more than --max-drop with 95 %
confidence, 0 when not. Exit 2, always in one line, for anything else: bad input, a comparison the gate
cannot decide, runs whose settings differ in one that changes answers (unless --allow-mismatch), or any
other error: a CI step never reads a failure of the command as "worse".
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from lab.errors import LabError, os_error_line
from lab.settings import Settings

EXIT_WORSE = 1
MAX_SEED = 2**32 - 1
PublishedPath = Callable[[str, Settings], str | None]  # ref, settings -> a published run's stored path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.resultfiles.run_settings import answer_changing_names
    from lab.analysis.run_pairs import load_metrics

    parser.add_argument("baseline", metavar="BASELINE", help="result file, run id or name in the store, or published run")
    parser.add_argument("candidate", metavar="CANDIDATE", help="the run compared with the baseline (same kinds)")
    parser.add_argument("more", nargs="*", metavar="RUN",
                        help="more runs judged together with the candidate: each against the baseline (simultaneous "
                             "intervals) and every run's chance of being the best with its expected regret")
    parser.add_argument("--metric", default="score", choices=list(load_metrics()),
                        help="the metric the gate checks (default: score); every metric is printed")
    parser.add_argument("--max-drop", type=float, default=None, metavar="POINTS",
                        help="gate: exit 1 when the candidate is worse by more than this with 95 %% confidence "
                             "(the interval's upper end below -POINTS; 0: any significant drop), else 0. Without "
                             "it the command is a look and exits 0 whatever it finds")
    parser.add_argument("--allow-mismatch", action="append", default=[], metavar="SETTING",
                        choices=answer_changing_names(),
                        help="gate anyway when the runs differ in this setting, one that changes answers "
                             "(repeatable)")
    parser.add_argument("--replay", default=None, metavar="JSONL",
                        help="the replay file whose step screens give equiv F1 its working directories "
                             "(default: $LAB_REPLAY, else the cached download)")
    parser.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"bootstrap seed, 0 to {MAX_SEED} (default from lab/scoring/paired.yaml)")
    parser.add_argument("--resamples", type=int, default=None, metavar="N",
                        help="bootstrap resamples (default 10000, from lab/scoring/paired.yaml)")
    parser.add_argument("--db", default=None, help="DuckDB file of the store (default: <results>/lab.duckdb or $LAB_DB)")
    parser.add_argument("--results", default=None, help="results folder of the store (default: results/)")


def _settings(args: argparse.Namespace) -> Settings:
    kwargs = {}
    if args.results:
        kwargs["results_dir"] = Path(args.results)
    if args.db:
        kwargs["db_path"] = Path(args.db)
    if args.replay:
        kwargs["replay_path"] = args.replay
    return Settings(**kwargs)


def _check_replay(path: str | None) -> None:
    """--replay names a local replay .jsonl file (a URL or a folder is refused in one line)."""
    if path is None:
        return
    p = Path(path).expanduser()
    if not path.strip() or not p.is_file() or p.suffix != ".jsonl":
        what = "no such file" if not p.exists() else "not a replay .jsonl file"
        raise LabError(f"--replay {path!r}: {what}; give the local replay file the runs were made on "
                       "(`python -m lab data download` fetches the full one)")


def _load_file(ref: str, stack: ExitStack, opened: dict, replay: str | None = None):
    """A result file's run, imported into a store of its own in a temporary folder (the lab's store is
    left alone)."""
    from lab.store.importer import import_path, run_id_of
    from lab.analysis.run_pairs import load_run

    path = Path(ref)
    if "files" not in opened:
        from lab.store.opening import open_store

        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-compare-")))
        (tmp / "results").mkdir()
        kept = Settings(results_dir=tmp / "results", db_path=tmp / "lab.duckdb", replay_path=replay)
        opened["files"] = stack.enter_context(open_store(kept))
    store = opened["files"]
    report = import_path(store, path)
    if report.failed:
        name, why = report.failed[0]
        raise LabError(why if why.startswith(name) else f"{ref}: {why}")
    run_id = run_id_of(path.read_bytes())
    if not store.rows("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
        raise LabError(f"{ref}: a reference-likelihood file, not a run with answers; compare result files")
    return load_run(store, run_id)


def _load_stored(ref: str, settings: Settings, stack: ExitStack, opened: dict,
                 published_path: PublishedPath | None):
    from lab.store.equiv_fill import fill_run, refill_stale
    from lab.analysis.run_pairs import load_run
    from lab.store.run_lookup import find_run

    if "store" not in opened:
        from lab.store.opening import open_store

        opened["store"] = stack.enter_context(open_store(settings, fill_left_pending=False))
    store = opened["store"]
    lookup = (lambda: published_path(ref, settings)) if published_path is not None else None
    run_id = find_run(store, ref, published_path=lookup)
    if settings.replay_path:  # a replay given now: a run filled without it (or with another) is filled with it
        refill_stale(store, [run_id])
    fill_run(store, run_id)  # a run whose equiv columns wait: filled now (a no-op when they are filled)
    return load_run(store, run_id)


def load_runs(refs: list[str], settings: Settings, stack: ExitStack, published_path: PublishedPath | None,
              replay: str | None = None) -> list:
    """Each ref's run (lab.analysis.run_pairs.RunSteps): result files imported into a store of their own, the rest
    looked up in the lab's store or among the fetched published runs."""
    opened: dict = {}
    runs = []
    for ref in refs:
        if Path(ref).exists() and not Path(ref).is_file():  # a folder, a FIFO, a device: never read
            raise LabError(f"{ref}: not a regular file; give a result JSON file, or a run of the store")
        if Path(ref).is_file():
            runs.append(_load_file(ref, stack, opened, replay))
        else:
            runs.append(_load_stored(ref, settings, stack, opened, published_path))
    return runs


def _check_args(args: argparse.Namespace) -> None:
    """One-line errors for options the comparison cannot use."""
    if args.max_drop is not None and (not math.isfinite(args.max_drop) or args.max_drop < 0):
        raise LabError(f"--max-drop {args.max_drop}: give a number of points ≥ 0")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        raise LabError(f"--seed {args.seed}: give a whole number from 0 to {MAX_SEED}")
    if getattr(args, "allow_mismatch", None) and args.max_drop is None:
        raise LabError("--allow-mismatch only matters to a gate: give --max-drop POINTS too")
    more = getattr(args, "more", [])
    for role, ref in (("BASELINE", args.baseline), ("CANDIDATE", args.candidate), *(("RUN", r) for r in more)):
        if not ref.strip():
            raise LabError(f"{role} is empty: give a result JSON file, a run id or name of the store, or a "
                           "published run")
    _check_replay(args.replay)


def run(args: argparse.Namespace, published_path: PublishedPath | None = None) -> int:
    """Compare the two runs (and gate with --max-drop); `published_path(ref, settings)` finds a published
    run's stored path (lab.published.fetch.published_path, passed in by lab.cli: the store imports nothing of
    published). Any error is a LabError (exit 2), never a traceback or exit 1."""
    try:
        return _run(args, published_path)
    except (LabError, KeyboardInterrupt):
        raise
    except OSError as exc:
        raise LabError(f"compare: {os_error_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - whatever its cause, a failure is exit 2, never "worse"
        raise LabError(f"compare failed: {type(exc).__name__}: {exc}") from None


def _run(args: argparse.Namespace, published_path: PublishedPath | None) -> int:
    from lab.analysis.run_pairs import compare_loaded, load_metrics, resample_setting

    _check_args(args)
    resamples = resample_setting(args.resamples)
    settings = _settings(args)
    with ExitStack() as stack:
        runs = load_runs([args.baseline, args.candidate, *args.more], settings, stack, published_path, args.replay)
        if args.more:
            from lab.analysis.compare_many_cli import judge_runs

            return judge_runs(runs, args, resamples)
        comparison = compare_loaded(runs[0], runs[1], resamples=resamples, seed=args.seed)
    gate, refusal = _gate(comparison, args, load_metrics()[args.metric])
    if args.json:
        print(json.dumps({**comparison.to_dict(), "gate": gate}, indent=2, allow_nan=False, default=_no_nan))
    else:
        print(_table(comparison, args.metric))
    if gate is None:  # a look: the figures are the answer
        if not args.json:
            print(f"a look, not a gate (exit 0 whatever it finds): give --max-drop POINTS to gate on {args.metric}")
        return 0
    if refusal:  # the figures are printed; the gate cannot decide: exit 2
        raise LabError(refusal)
    if not args.json:
        print(f"gate ({args.metric}, --max-drop {args.max_drop:g}): {'FAILED' if gate['failed'] else 'passed'}: "
              f"{gate['reason']}")
    return EXIT_WORSE if gate["failed"] else 0


def _mismatch(comparison, allowed: list[str]) -> str | None:
    """Why the gate refuses runs whose settings differ in one that changes answers (None: it does not)."""
    if comparison.settings is None:
        return None
    blocking = [d for d in comparison.settings.changing if d.name not in allowed]
    if not blocking:
        return None
    names = sorted({d.name for d in blocking}, key=[d.name for d in blocking].index)
    return (f"cannot gate: the runs differ in {', '.join(d.text() for d in blocking)}, which changes the answers; "
            f"compare runs made the same way, or accept it with {' '.join(f'--allow-mismatch {n}' for n in names)}")


def _gate(comparison, args: argparse.Namespace, spec) -> tuple[dict | None, str | None]:
    """The gate's verdict on `args.metric` as the JSON reports it (None: no --max-drop, a look), and why it
    refuses to decide (None: it decides)."""
    if args.max_drop is None:
        return None, None
    gated = comparison.get(args.metric)
    if gated is None or gated.ci is None:
        why = (comparison.notes.get(args.metric) if gated is None else gated.note) or "not comparable"
        return ({"metric": args.metric, "max_drop": args.max_drop, "failed": None, "reason": f"cannot gate: {why}"},
                f"cannot gate on {args.metric}: {why}")
    mismatch = _mismatch(comparison, args.allow_mismatch)
    if mismatch:
        return {"metric": args.metric, "max_drop": args.max_drop, "failed": None, "reason": mismatch}, mismatch
    failed = gated.worse_by_more_than(args.max_drop)
    unit = "points" if spec.scale == 100 else ""
    direction = "above +" if spec.lower_is_better else "below −"
    bound = gated.low if spec.lower_is_better else gated.high
    reason = (f"the candidate is worse by more than {args.max_drop:g} {unit} with 95 % confidence (the interval's "
              f"{'lower' if spec.lower_is_better else 'upper'} end {bound:+.{spec.digits}f} is "
              f"{direction}{args.max_drop:g})") if failed else \
        f"the candidate is not worse by more than {args.max_drop:g} {unit} with 95 % confidence"
    return {"metric": args.metric, "max_drop": args.max_drop, "failed": failed, "reason": reason}, None


def _no_nan(value):  # pragma: no cover - json calls it only for objects it cannot encode
    raise TypeError(f"cannot encode {type(value).__name__}")


def _table(comparison, metric: str = "score") -> str:
    from lab.analysis.interval_hint import hint_for
    from lab.analysis.run_pairs import counted, delta_text, load_metrics, mde_text, verdict_words

    a, b = comparison.baseline, comparison.candidate
    lines = [f"baseline:  {a.label()}", f"candidate: {b.label()}", ""]
    head = f"{'metric':<52} {'baseline':>9} {'candidate':>9}  {'Δ [95 % interval]':<28} {'verdict':<27} " \
           f"{'detects':>8} {'steps':>5} {'improved':>8} {'regressed':>9} {'unchanged':>9}"
    lines += [head, "-" * len(head)]
    first = None
    for name, diff in comparison.differences.items():
        spec = load_metrics()[name]
        if diff is None:
            lines.append(f"{spec.label:<52} {'':>9} {'':>9}  {comparison.notes.get(name, 'not comparable')}")
            continue
        first = first or diff
        if diff.ci is None:
            lines.append(f"{spec.label:<52} {diff.baseline:>9.{spec.digits}f} {diff.candidate:>9.{spec.digits}f}  "
                         f"{delta_text(diff, spec.digits)}")
            continue
        lines.append(f"{spec.label:<52} {diff.baseline:>9.{spec.digits}f} {diff.candidate:>9.{spec.digits}f}  "
                     f"{delta_text(diff, spec.digits):<28} {diff.verdict:<27} {mde_text(diff, name):>8} {diff.steps:>5} "
                     f"{diff.improved:>8} "
                     f"{diff.regressed:>9} {diff.unchanged:>9}")
    if first is not None:
        lines += ["", f"Δ = candidate − baseline over {counted(first.steps, 'common step')} of "
                      f"{counted(first.tasks, 'task')}; 95 % (pairwise) intervals "
                      f"from a paired bootstrap over tasks ({first.resamples} resamples, seed {first.seed}"
                      f"{', sampled answers resampled within steps' if first.two_level else ''}); detects: the "
                      "smallest true difference each interval finds 80 % of the time."]
        score = comparison.get("score")
        if score is not None and score.ci is not None:
            lines.append(f"score: {verdict_words(score)}")
    if comparison.settings is not None:
        lines.append(comparison.settings.line())
    hint = hint_for(comparison.get(metric))
    if hint:
        lines.append(hint)
    return "\n".join(lines)

