"""Triage over sampled runs: unstable steps, mean F1 against stability per run, samples A vs B.

Every figure comes from the store: per-step `sample_stats` (lab.scoring.stability at import) and
the runs' aggregates; nothing is recomputed here beyond SQL joins and counts.
"""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from lab.errors import LabError
from lab.triage.db import query_df

WIN, LOSS, TIE = "A better", "B better", "tie"


def sampled_runs(store: Any) -> pd.DataFrame:
    """Runs that carry samples: run_id, display name, steps with samples, samples per step."""
    return query_df(
        store,
        """SELECT r.run_id, r.display_name, count(*) AS sampled_steps, min(st.n_samples) AS samples
           FROM sample_stats st JOIN runs r USING (run_id)
           GROUP BY ALL ORDER BY r.display_name, r.run_id""",
    )


def unstable_steps(store: Any, run_ids: Sequence[str] = (), min_spread: float = 0.5,
                   limit: int | None = 500) -> pd.DataFrame:
    """Steps whose samples' F1 spread (max − min) is at least `min_spread`, widest first.

    `run_ids` empty: every sampled run. Columns: run, run_id, step_key, bucket, greedy (sample 0)
    F1, mean/std/min/max/spread of the samples' F1, passing samples, distinct answers."""
    if not 0.0 <= float(min_spread) <= 1.0:
        raise LabError(f"unstable steps: spread {min_spread} must be between 0 and 1")
    sql = """SELECT r.display_name AS run, st.run_id, st.step_key, s.bucket, s.command_f1 AS sample0_f1,
                    st.f1_mean, st.f1_std, st.f1_min, st.f1_max, st.f1_spread,
                    st.n_pass || '/' || st.n_samples AS passing, st.n_distinct AS distinct_answers
             FROM sample_stats st JOIN runs r USING (run_id)
             JOIN steps s ON s.run_id = st.run_id AND s.step_key = st.step_key
             WHERE st.f1_spread >= ? AND (len(?) = 0 OR list_contains(?, st.run_id))
             ORDER BY st.f1_spread DESC, st.f1_std DESC, r.display_name, s.task_id, s.step_idx"""
    params: list[Any] = [float(min_spread), list(run_ids), list(run_ids)]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(int(limit))
    return query_df(store, sql, params)


def stability_by_run(store: Any, min_spread: float = 0.5) -> pd.DataFrame:
    """One row per sampled run: greedy (sample 0) F1, mean F1 over samples, mean F1 std over
    steps and pass@1 (from its aggregate), and the share of steps with spread ≥ `min_spread`."""
    return query_df(
        store,
        """SELECT r.run_id, r.display_name AS run, r.avg_command_f1 AS sample0_f1,
                  TRY_CAST(json_extract(r.aggregate_json, '$.mean_f1_over_samples') AS DOUBLE) AS mean_f1_over_samples,
                  TRY_CAST(json_extract(r.aggregate_json, '$.f1_std_mean') AS DOUBLE) AS f1_std_mean,
                  TRY_CAST(json_extract(r.aggregate_json, '$.pass_at_k."1"') AS DOUBLE) AS pass_at_1,
                  min(st.n_samples) AS samples,
                  round(100.0 * avg(CASE WHEN st.f1_spread >= ? THEN 1 ELSE 0 END), 1) AS unstable_pct
           FROM runs r JOIN sample_stats st USING (run_id)
           GROUP BY ALL ORDER BY mean_f1_over_samples DESC NULLS LAST, run""",
        [float(min_spread)],
    )


def samples_head_to_head(store: Any, run_a: str, run_b: str, margin: float = 0.0) -> pd.DataFrame:
    """Per step both runs sampled: mean sample F1 of A and of B, the difference, who is better
    (by more than `margin`), and the same for their greedy (sample 0) answers."""
    if run_a == run_b:
        raise LabError("samples A vs B: pick two different runs")
    have = set(sampled_runs(store)["run_id"])
    missing = [r for r in (run_a, run_b) if r not in have]
    if missing:
        raise LabError(f"run(s) {', '.join(missing)} have no samples; replay them with --samples N")
    return query_df(
        store,
        """SELECT a.step_key, sa.bucket, a.f1_mean AS a_mean_f1, b.f1_mean AS b_mean_f1,
                  round(a.f1_mean - b.f1_mean, 4) AS delta,
                  CASE WHEN a.f1_mean - b.f1_mean > ? THEN ? WHEN b.f1_mean - a.f1_mean > ? THEN ? ELSE ? END AS samples_say,
                  sa.command_f1 AS a_sample0_f1, sb.command_f1 AS b_sample0_f1,
                  CASE WHEN sa.command_f1 - sb.command_f1 > ? THEN ? WHEN sb.command_f1 - sa.command_f1 > ? THEN ?
                       ELSE ? END AS greedy_says,
                  a.f1_std AS a_std, b.f1_std AS b_std
           FROM sample_stats a JOIN sample_stats b ON b.step_key = a.step_key AND b.run_id = ?
           JOIN steps sa ON sa.run_id = a.run_id AND sa.step_key = a.step_key
           JOIN steps sb ON sb.run_id = b.run_id AND sb.step_key = b.step_key
           WHERE a.run_id = ?
           ORDER BY abs(a.f1_mean - b.f1_mean) DESC, sa.task_id, sa.step_idx""",
        [margin, WIN, margin, LOSS, TIE, margin, WIN, margin, LOSS, TIE, run_b, run_a],
    )


def head_to_head_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Counts of A better / B better / tie, by the samples and by the greedy answers."""
    rows = []
    for label, column in (("by mean sample F1", "samples_say"), ("by greedy (sample 0) F1", "greedy_says")):
        counts = table[column].value_counts() if len(table) else pd.Series(dtype=int)
        rows.append({"verdict": label, WIN: int(counts.get(WIN, 0)), LOSS: int(counts.get(LOSS, 0)),
                     TIE: int(counts.get(TIE, 0))})
    return pd.DataFrame(rows, columns=["verdict", WIN, LOSS, TIE])


def verdict_flips(table: pd.DataFrame) -> int:
    """Steps where the samples' verdict differs from the greedy answers' verdict."""
    return int((table["samples_say"] != table["greedy_says"]).sum()) if len(table) else 0
