"""Baseline vs candidate: per-step F1 differences, regressions, and the checkpoint flip table."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from lab.errors import LabError
from lab.triage.db import query_df, query_dicts

DISAGREEMENT_VIEWS = {
    "all": ("", "abs(c.command_f1 - b.command_f1) DESC"),
    "regressed": ("AND c.command_f1 < b.command_f1", "c.command_f1 - b.command_f1 ASC"),
    "improved": ("AND c.command_f1 > b.command_f1", "c.command_f1 - b.command_f1 DESC"),
    # the candidate's model gives the reference a lower NLL per token than the baseline's (score-reference runs
    # of both models needed), the largest move first
    "toward_reference": ("AND rc.ref_nll_per_token < rb.ref_nll_per_token",
                         "rc.ref_nll_per_token - rb.ref_nll_per_token ASC"),
}
DEFAULT_RIGHT_THRESHOLD = 0.5
RIGHT_TO_WRONG = "right → wrong"
WRONG_TO_RIGHT = "wrong → right"


def _check_runs(store: Any, run_ids: Sequence[str]) -> None:
    found = {r["run_id"] for r in query_dicts(store, "SELECT run_id FROM runs WHERE list_contains(?, run_id)", [list(run_ids)])}
    missing = [r for r in run_ids if r not in found]
    if missing:
        raise LabError(f"unknown run id(s): {', '.join(missing)}; pick runs from the list")


def disagreement(
    store: Any, baseline: str, candidate: str, view: str = "all", limit: int | None = None
) -> pd.DataFrame:
    """Steps both runs answered, with F1 of each and `delta` = candidate − baseline.

    `view`: all (sorted by |delta|), regressed (delta < 0, worst first), improved (delta > 0, best first),
    toward_reference (the candidate's model gives the reference a lower NLL per token, largest move first).
    """
    if view not in DISAGREEMENT_VIEWS:
        raise LabError(f"disagreement view {view!r}: use {', '.join(DISAGREEMENT_VIEWS)}")
    _check_runs(store, [baseline, candidate])
    cond, order = DISAGREEMENT_VIEWS[view]
    # the measures first (F1s, delta, the reference NLLs), the step's facts after: a table wider than the page
    # scrolls its facts out of view, never the NLL columns
    sql = f"""
        SELECT b.step_key,
               b.command_f1 AS baseline_f1, c.command_f1 AS candidate_f1,
               round(c.command_f1 - b.command_f1, 4) AS delta,
               round(rb.ref_nll_per_token, 4) AS baseline_ref_nll, round(rc.ref_nll_per_token, 4) AS candidate_ref_nll,
               round(rc.ref_nll_per_token - rb.ref_nll_per_token, 4) AS ref_nll_delta,
               fb.failure_kind AS baseline_failure, fc.failure_kind AS candidate_failure,
               b.first_cmd_exact AS baseline_first_exact, c.first_cmd_exact AS candidate_first_exact,
               b.bucket, b.source_group, b.task_id, b.step_idx
        FROM steps b JOIN steps c ON c.step_key = b.step_key AND c.run_id = ?
        LEFT JOIN step_flags fb ON fb.run_id = b.run_id AND fb.step_key = b.step_key
        LEFT JOIN step_flags fc ON fc.run_id = c.run_id AND fc.step_key = c.step_key
        LEFT JOIN step_reference rb ON rb.run_id = b.run_id AND rb.step_key = b.step_key
        LEFT JOIN step_reference rc ON rc.run_id = c.run_id AND rc.step_key = c.step_key
        WHERE b.run_id = ? {cond}
        ORDER BY {order}, b.task_id, b.step_idx"""
    params: list[Any] = [candidate, baseline]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return query_df(store, sql, params)


def order_as_series(store: Any, run_ids: Sequence[str]) -> list[str]:
    """Runs in checkpoint order (checkpoint_step, then timestamp), runs without one last."""
    _check_runs(store, run_ids)
    rows = query_dicts(
        store,
        "SELECT run_id FROM runs WHERE list_contains(?, run_id)"
        " ORDER BY checkpoint_step NULLS LAST, timestamp NULLS LAST, display_name",
        [list(run_ids)],
    )
    return [r["run_id"] for r in rows]


def flip_table(
    store: Any, run_ids: Sequence[str], threshold: float = DEFAULT_RIGHT_THRESHOLD, order: bool = True
) -> pd.DataFrame:
    """Steps whose right/wrong status (right = F1 ≥ threshold) flips between consecutive runs.

    `run_ids` is the series (ordered by checkpoint unless `order=False`). One row per flip:
    from_run, to_run (display names), step_key, from_f1, to_f1, flip.
    """
    if len(run_ids) < 2:
        raise LabError("flip table: pick at least two runs of one model (a checkpoint series)")
    if not 0.0 <= float(threshold) <= 1.0:
        raise LabError(f"flip table: threshold {threshold} must be between 0 and 1")
    series = order_as_series(store, run_ids) if order else list(run_ids)
    frames = []
    for position, (a, b) in enumerate(zip(series, series[1:])):
        frames.append(
            query_df(
                store,
                """SELECT ? AS pair, ra.display_name AS from_run, rb.display_name AS to_run,
                          sa.run_id AS from_run_id, sb.run_id AS to_run_id, sa.step_key, sa.task_id, sa.step_idx,
                          sa.bucket, sa.source_group, sa.command_f1 AS from_f1, sb.command_f1 AS to_f1,
                          CASE WHEN sa.command_f1 >= ? THEN ? ELSE ? END AS flip
                   FROM steps sa JOIN steps sb ON sb.step_key = sa.step_key AND sb.run_id = ?
                   JOIN runs ra ON ra.run_id = sa.run_id JOIN runs rb ON rb.run_id = sb.run_id
                   WHERE sa.run_id = ? AND ((sa.command_f1 >= ?) <> (sb.command_f1 >= ?))
                   ORDER BY sa.task_id, sa.step_idx""",
                [position, threshold, RIGHT_TO_WRONG, WRONG_TO_RIGHT, b, a, threshold, threshold],
            )
        )
    return pd.concat(frames, ignore_index=True)


def flip_summary(flips: pd.DataFrame) -> pd.DataFrame:
    """Counts of right → wrong and wrong → right per consecutive pair of the flip table."""
    if flips.empty:
        return pd.DataFrame(columns=["from_run", "to_run", RIGHT_TO_WRONG, WRONG_TO_RIGHT])
    counts = flips.pivot_table(index=["pair", "from_run", "to_run"], columns="flip", values="step_key",
                               aggfunc="count", fill_value=0)
    for col in (RIGHT_TO_WRONG, WRONG_TO_RIGHT):
        if col not in counts.columns:
            counts[col] = 0
    out = counts[[RIGHT_TO_WRONG, WRONG_TO_RIGHT]].reset_index().sort_values("pair")
    out.columns.name = None
    return out.drop(columns="pair").reset_index(drop=True)
