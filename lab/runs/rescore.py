"""`python -m lab rescore IN.json [--scorer corrected|legacy] -o OUT.json`.

Recomputes every per-step metric and the aggregate from the command units stored in a
result file, without re-generating anything. Units stored as the Python repr of a list
(`"['ls', 'pwd']"`, seen in some legacy rows) are decoded with `ast.literal_eval` by
`lab.resultfiles.units.coerce_units` and written back as real lists.
"""
from __future__ import annotations

import argparse
import copy
import sys
from typing import Iterable

from lab.errors import ResultFileError
from lab.runs.sample_scores import rescore_samples
from lab.resultfiles.files import LEGACY, read_result_file, scoring_version, write_result_file
from lab.resultfiles.units import coerce_units
from lab.scoring import SCORERS, aggregate_scores, score_batch, task_complete_fields
from lab.tb2lite import CORRECTED

DEFAULT_SCORER = CORRECTED
METRIC_KEYS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN", help="a TB2-lite result JSON file (legacy or corrected)")
    parser.add_argument(
        "--scorer",
        choices=sorted(SCORERS),
        default=None,
        help="scoring rules (default: corrected, also for legacy 386-step files; pass "
        "--scorer legacy to reproduce the old numbers, e.g. empty vs empty = 1.0)",
    )
    parser.add_argument("-o", "--output", metavar="OUT", required=True, help="where to write the rescored JSON")


def _units(value: object, strict: bool) -> list[str]:
    """Stored units as a list: a list is taken as is unless `strict` (then every item is str'd)."""
    if type(value) is list and not strict:
        return value  # type: ignore[return-value]
    return coerce_units(value)


def _step_pairs(result: dict, strict: bool = False) -> list[tuple[list[str], list[str]]]:
    pairs = []
    for i, row in enumerate(result["per_step"]):
        try:
            pred = _units(row.get("pred_command_units"), strict)
            ref = _units(row.get("ref_command_units"), strict)
        except ValueError as exc:
            raise ResultFileError(f"per_step[{i}] ({row.get('task_id')}/{row.get('step_idx')}): {exc}") from None
        pairs.append((pred, ref))
    return pairs


def _apply(result: dict, pairs: list[tuple[list[str], list[str]]], metrics: list, scorer: str) -> dict:
    out = copy.copy(result)
    rows = []
    for row, (pred, ref), m in zip(result["per_step"], pairs, metrics):
        new = dict(row)
        new["ref_command_units"], new["pred_command_units"] = ref, pred
        new.update(m.to_dict())
        new["pred_task_complete_true"] = task_complete_fields(
            row.get("pred_task_complete"), row.get("ref_task_complete"), scorer
        )["pred_task_complete_true"]
        rows.append(new)
    out["per_step"] = rows
    out["aggregate"] = {**(result.get("aggregate") or {}), **aggregate_scores(rows, scorer)}
    out["rescored_with"] = scorer
    return rescore_samples(out, scorer)  # sampled answers (replay --samples), if any


def rescore_result(result: dict, scorer: str = DEFAULT_SCORER) -> dict:
    """A copy of `result` with per-step metrics, pred_task_complete_true and aggregate recomputed."""
    return rescore_many([result], scorer)[0]


def rescore_many(results: Iterable[dict], scorer: str = DEFAULT_SCORER) -> list[dict]:
    """Rescore several results at once: one `score_batch` call over all their steps."""
    results = list(results)
    per_result = [_step_pairs(r) for r in results]
    try:
        flat = score_batch((pair for pairs in per_result for pair in pairs), scorer)
    except TypeError:  # a unit list holding unhashable items: coerce every item to str
        per_result = [_step_pairs(r, strict=True) for r in results]
        flat = score_batch((pair for pairs in per_result for pair in pairs), scorer)
    out, start = [], 0
    for result, pairs in zip(results, per_result):
        out.append(_apply(result, pairs, flat[start : start + len(pairs)], scorer))
        start += len(pairs)
    return out


def _changed_rows(before: dict, after: dict) -> int:
    return sum(
        any(old.get(k) != new.get(k) for k in METRIC_KEYS)
        for old, new in zip(before["per_step"], after["per_step"])
    )


def run(args: argparse.Namespace) -> int:
    result = read_result_file(args.input)
    scorer = args.scorer or DEFAULT_SCORER
    if args.scorer is None and scoring_version(result) == LEGACY:
        # Deliberate: the default stays `corrected` even for a legacy file, so a rescore never
        # silently applies different rules; the note says how to get the old numbers back.
        print(f"note: {args.input} looks like a legacy 386-step file; scoring with '{CORRECTED}' "
              "(use --scorer legacy for the old rules)", file=sys.stderr)
    rescored = rescore_result(result, scorer)
    write_result_file(args.output, rescored)
    agg = rescored["aggregate"]
    print(f"{args.output}: {agg['steps']} steps rescored with '{scorer}', "
          f"{_changed_rows(result, rescored)} changed; avg_command_f1 {agg['avg_command_f1']}, "
          f"first_cmd_exact {agg['first_cmd_exact_pct']}%")
    return 0
