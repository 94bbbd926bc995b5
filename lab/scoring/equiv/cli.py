"""`python -m lab equiv`: equiv_f1 of one pair of command-unit lists, as one JSON object."""
from __future__ import annotations

import argparse
import json
from typing import Any

from lab import jsontext
from lab.errors import LabError
from lab.scoring.equiv.pipeline import normalise_units
from lab.scoring.equiv.registry import EquivContext
from lab.scoring.equiv.score import equiv_step
from lab.scoring.metrics import score_batch
from lab.scoring.tokens import normalize_unit
from lab.tb2lite import CORRECTED, SCORER_NAMES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cwd", required=True, help="the working directory the step starts in (cd targets resolve against it)")
    parser.add_argument("--home", default=None, help="the user's home (`cd ~`, `cd $HOME`); unknown when left out")
    parser.add_argument("--ref", required=True, help='reference units as a JSON list of strings, e.g. \'["cd app", "ls -la"]\'')
    parser.add_argument("--pred", required=True, help="predicted units as a JSON list of strings")
    parser.add_argument("--scorer", choices=SCORER_NAMES, default=CORRECTED,
                        help="scoring rules of the harness F1 beside it: corrected (default) or legacy (empty vs empty = 1.0)")


def units_arg(name: str, text: str) -> list[str]:
    """A JSON list of strings, or a one-line error naming the option."""
    try:
        value = jsontext.loads(text)
    except jsontext.JsonTextError as exc:
        raise LabError(f"{name}: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise LabError(f"{name}: expected a JSON list of strings, got {type(value).__name__}")
    return value


def equiv_report(ref: list[str], pred: list[str], cwd: str, home: str | None, scorer: str) -> dict[str, Any]:
    """The harness's and the equiv metrics of one pair, the normalised units and whether the rules
    write both sides alike (the claim the shell oracle checks)."""
    context = EquivContext(cwd=cwd, home=home)
    harness = score_batch([(list(pred), list(ref))], scorer)[0]
    result = equiv_step(pred, ref, context, harness=harness, scorer=scorer)
    if result.metrics is None:  # past the per-step limits: nothing normalised, nothing guessed
        return {"f1": harness.f1, "precision": harness.precision, "recall": harness.recall,
                "equiv_precision": None, "equiv_recall": None, "equiv_f1": None, "skipped": result.skipped,
                "cwd": cwd, "home": home, "scorer": scorer, "label": "equiv F1 (not the published score)"}
    equiv = result.metrics
    ref_norm, pred_norm = normalise_units(ref, context), normalise_units(pred, context)
    return {
        "f1": harness.f1, "precision": harness.precision, "recall": harness.recall,
        **equiv.to_dict(), "normalised_f1": equiv.normalised_f1,
        "written_alike": [normalize_unit(u) for u in ref_norm] == [normalize_unit(u) for u in pred_norm],
        "ref_normalised": ref_norm, "pred_normalised": pred_norm,
        "cwd": cwd, "home": home, "scorer": scorer,
        "label": "equiv F1 (not the published score)",
    }


def run(args: argparse.Namespace) -> int:
    ref, pred = units_arg("--ref", args.ref), units_arg("--pred", args.pred)
    print(json.dumps(equiv_report(ref, pred, args.cwd, args.home, args.scorer), ensure_ascii=False))
    return 0
