"""`python -m lab compare BASELINE CANDIDATE RUN…`: several runs judged together. Each run after the baseline
gets its Δ on `--metric` with an interval simultaneous over them (max-T), the smallest difference that interval
detects, and a verdict; every run, the baseline too, gets its chance of being the best (P(best), on the
baseline's steps) and the expected regret of picking it. Without --max-drop it is a look (exit 0); with it the
gate fails (exit 1) when any run is worse than the baseline by more than --max-drop with 95 % confidence, and
cannot decide (exit 2) when one has no interval or differs from the baseline in a setting that changes answers
(unless --allow-mismatch accepts it), as for two runs.
"""
from __future__ import annotations

import argparse
import json

from lab.errors import LabError
from lab.analysis.run_pairs import RunSteps, _finite, counted, delta_text, load_metrics, mde_text, verdict_words
from lab.analysis.judge import against, chances
from lab.analysis.run_matrix import table_of

EXIT_WORSE = 1


def judged(runs: list[RunSteps], metric: str, resamples: int, seed: int | None) -> tuple[dict, list]:
    """The JSON of several runs judged together (see the module), and each candidate against the baseline
    (lab.analysis.run_pairs.AgainstBaseline)."""
    table = table_of(runs)
    ids = [r.run_id for r in runs]
    found = against(table, ids[0], ids[1:], metric, resamples=resamples, seed=seed)
    best = chances(table, ids, ids[0], metric, resamples=resamples, seed=seed)
    rows = []
    for i, run in enumerate(runs):
        row = {"run_id": run.run_id, "name": run.name, "role": "baseline" if i == 0 else "candidate",
               "p_best": best.p_best[i], "expected_regret": best.expected_regret[i]}
        if i:
            diff, settings = found[i - 1].difference, found[i - 1].settings
            row.update({"difference": None if diff is None else {k: _finite(v) for k, v in diff.to_dict().items()},
                        "settings": settings.to_dict() if settings is not None else None,
                        "note": found[i - 1].note,
                        "verdict": verdict_words(diff, metric) if diff is not None else found[i - 1].note})
        rows.append(row)
    return ({"metric": metric, "baseline": {"run_id": runs[0].run_id, "name": runs[0].name}, "runs": rows,
             "p_best_steps": best.steps, "p_best_tasks": best.tasks, "p_best_note": best.note},
            found)


def _gate(report: dict, found: list, args: argparse.Namespace) -> tuple[dict | None, str | None]:
    """The gate's verdict (None: no --max-drop, a look) and why it cannot decide (None: it decides)."""
    if args.max_drop is None:
        return None, None
    failed, undecided = [], []
    allowed = set(getattr(args, "allow_mismatch", []) or [])
    for row, judged in zip(report["runs"][1:], found):
        diff, settings = judged.difference, judged.settings
        if diff is None or diff.ci is None:
            undecided.append(f"{row['name']}: {row['note'] or (diff.note if diff else '') or 'not comparable'}")
            continue
        blocking = [d for d in (settings.changing if settings is not None else []) if d.name not in allowed]
        if blocking:
            undecided.append(f"{row['name']} differs in {', '.join(d.text() for d in blocking)}, which changes the "
                             f"answers (accept it with {' '.join(f'--allow-mismatch {d.name}' for d in blocking)})")
            continue
        if diff.worse_by_more_than(args.max_drop):
            failed.append(row["name"])
    reason = (f"worse than the baseline by more than {args.max_drop:g} with 95 % confidence: {', '.join(failed)}"
              if failed else f"no run is worse than the baseline by more than {args.max_drop:g} with 95 % confidence")
    gate = {"metric": report["metric"], "max_drop": args.max_drop, "failed": bool(failed) if not undecided else None,
            "reason": reason if not undecided else f"cannot gate: {'; '.join(undecided)}"}
    return gate, (f"cannot gate on {report['metric']}: {'; '.join(undecided)}" if undecided else None)


def _text(report: dict, found: list) -> str:
    spec = load_metrics()[report["metric"]]
    lines = [f"baseline: {report['baseline']['name']} [{report['baseline']['run_id']}]", ""]
    head = (f"{'run':<44} {spec.name:>9}  {'Δ [95 % interval]':<26} {'detects':>8} {'P(best)':>8} {'regret':>7}  verdict")
    lines += [head, "-" * len(head)]
    for row, judged in zip(report["runs"], [None, *found]):
        diff = judged.difference if judged is not None else None
        p = "" if row["p_best"] is None else f"{row['p_best']:.3f}"
        regret = "" if row["expected_regret"] is None else f"{row['expected_regret']:.2f}"
        if row["role"] == "baseline":
            lines.append(f"{row['name'][:44]:<44} {'':>9}  {'baseline':<26} {'':>8} {p:>8} {regret:>7}")
            continue
        figure = "" if diff is None else f"{diff.candidate:.{spec.digits}f}"
        differ = f" · settings: {judged.settings.short()}" if judged.settings is not None and judged.settings.differ \
            else ""
        lines.append(f"{row['name'][:44]:<44} {figure:>9}  {delta_text(diff, spec.digits, row['note']):<26} "
                     f"{mde_text(diff, report['metric']):>8} {p:>8} {regret:>7}  {row['verdict']}{differ}")
    label = next((a.difference.adjustment for a in found if a.difference is not None and a.difference.ci),
                 "simultaneous over the runs with one (max-T)")
    lines += ["", f"Δ = run − baseline over their common steps; 95 % intervals {label}; "
                  "detects: the smallest true difference each interval finds 80 % of the time; P(best): the share of "
                  f"task resamples in which the run has the best {spec.name} on the baseline's "
                  f"{counted(report['p_best_steps'], 'step')} of {counted(report['p_best_tasks'], 'task')}; "
                  "regret: what picking it gives up on average"
                  + (f" ({report['p_best_note']})" if report["p_best_note"] else "") + "."]
    return "\n".join(lines)


def judge_runs(runs: list[RunSteps], args: argparse.Namespace, resamples: int) -> int:
    """Print several runs judged together (text or --json) and gate with --max-drop; the exit status of
    `compare`."""
    report, found = judged(runs, args.metric, resamples, args.seed)
    gate, refusal = _gate(report, found, args)
    if args.json:
        print(json.dumps({**report, "gate": gate}, indent=2, allow_nan=False))
    else:
        print(_text(report, found))
    if gate is None:
        if not args.json:
            print(f"a look, not a gate (exit 0 whatever it finds): give --max-drop POINTS to gate on {args.metric}")
        return 0
    if refusal:
        raise LabError(refusal)
    if not args.json:
        print(f"gate ({args.metric}, --max-drop {args.max_drop:g}): {'FAILED' if gate['failed'] else 'passed'}: "
              f"{gate['reason']}")
    return EXIT_WORSE if gate["failed"] else 0
