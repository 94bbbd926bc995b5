"""`python -m lab plan BASELINE CANDIDATE`: how big a difference this comparison can see, where its variance comes
from (between tasks, between the steps of a task, between the answers of a step) and what more answers per step
or more tasks would detect (lab.analysis.plan). The runs are given as to `compare`: result files, runs of the store,
or fetched published runs."""
from __future__ import annotations

import argparse
import json
from contextlib import ExitStack

from lab.analysis.compare_cli import PublishedPath, _check_replay, _settings, load_runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from lab.analysis.run_pairs import load_metrics

    parser.add_argument("baseline", metavar="BASELINE", help="result file, run id or name in the store, or published run")
    parser.add_argument("candidate", metavar="CANDIDATE", help="the run compared with the baseline (same kinds)")
    parser.add_argument("--metric", default="score", choices=list(load_metrics()), help="the metric (default: score)")
    parser.add_argument("--replay", default=None, metavar="JSONL",
                        help="the replay file the runs were made on (as for compare; default: $LAB_REPLAY)")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default from lab/scoring/paired.yaml)")
    parser.add_argument("--resamples", type=int, default=None, metavar="N",
                        help="bootstrap resamples (default 10000, from lab/scoring/paired.yaml)")
    parser.add_argument("--db", default=None, help="DuckDB file of the store (default: <results>/lab.duckdb or $LAB_DB)")
    parser.add_argument("--results", default=None, help="results folder of the store (default: results/)")


def _as_dict(plan) -> dict:
    return {"metric": plan.metric, "baseline": plan.baseline, "candidate": plan.candidate,
            "delta": plan.difference.delta, "ci": plan.difference.ci, "mde": plan.difference.mde,
            "verdict": plan.difference.verdict, "steps": plan.parts.steps, "tasks": plan.parts.tasks,
            "answers_per_step": plan.parts.answers,
            "variance": {"between tasks": plan.parts.task, "between steps of a task": plan.parts.step,
                         "between answers of a step": plan.parts.answer if plan.parts.answers_known else None},
            "shares": plan.shares, "dominant": plan.dominant,
            "designs": [{"design": r.label, "mde": r.mde, "mde_low": r.low} for r in plan.rows], "advice": plan.advice}


def _text(plan) -> str:
    from lab.analysis.run_pairs import delta_text, detectable_unit, metric_spec, verdict_words

    spec = metric_spec(plan.metric)
    unit, digits = detectable_unit(spec)
    d = plan.difference
    lines = [f"plan for {plan.metric}: baseline {plan.baseline}, candidate {plan.candidate}",
             f"{d.steps} common steps of {d.tasks} tasks; Δ {delta_text(d, spec.digits)}: {verdict_words(d, plan.metric)}",
             "", f"where the paired variance of one step's difference comes from ({unit or spec.name}²):"]
    shares = plan.shares
    values = {"between tasks": plan.parts.task, "between steps of a task": plan.parts.step,
              "between answers of a step": plan.parts.answer if plan.parts.answers_known else None}
    for name, value in values.items():
        shown = "not measured (one answer per step)" if value is None else f"{value:10.3f}  {shares[name]:>4.0%} of Δ's variance"
        lines.append(f"  {name:<27} {shown}{'  ← dominates' if name == plan.dominant else ''}")
    lines += ["", f"the smallest true difference found 80 % of the time at 95 % ({unit or spec.name}):"]
    for row in plan.rows:
        value = f"{row.mde:.{digits}f}" if row.low is None else f"{row.low:.{digits}f} … {row.mde:.{digits}f}"
        lines.append(f"  {row.label:<40} {value}")
    if any(r.low is not None for r in plan.rows):
        lines.append("  (a range: the low end if all of the between-steps part were sampling noise, the high end if "
                     "answers repeat, as at temperature 0)")
    lines += [""] + [f"- {a}" for a in plan.advice]
    return "\n".join(lines)


def run(args: argparse.Namespace, published_path: PublishedPath | None = None) -> int:
    """Print the plan for the two runs."""
    from lab.analysis.run_pairs import resample_setting
    from lab.analysis.plan import plan_pair

    resamples = resample_setting(args.resamples)
    _check_replay(args.replay)
    with ExitStack() as stack:
        runs = load_runs([args.baseline, args.candidate], _settings(args), stack, published_path, args.replay)
        plan = plan_pair(runs[0], runs[1], args.metric, resamples=resamples, seed=args.seed)
    print(json.dumps(_as_dict(plan), indent=2, allow_nan=False) if args.json else _text(plan))
    return 0
