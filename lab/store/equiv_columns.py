"""equiv_f1 columns of the store (not the published score): per step from the stored units, per
run the mean and the spelling gap. Computed after the import (lab.store.equiv_fill); the harness
columns are never touched."""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from lab.scoring.equiv import NEEDS_REPLAY, EquivContext, depends_on_cwd, equiv_batch, replay_contexts, skip_reason, too_large
from lab.scoring.metrics import StepMetrics

EQUIV_STEP_SCHEMA = pa.schema(
    [("equiv_precision", pa.float64()), ("equiv_recall", pa.float64()), ("equiv_f1", pa.float64()),
     ("equiv_cwd", pa.string()), ("equiv_skipped", pa.string())]
)


def _stored_metrics(row: dict) -> StepMetrics | None:
    values = [row.get(k) for k in ("first_cmd_exact", "command_precision", "command_recall", "command_f1")]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        return None
    return StepMetrics(*map(float, values))


def with_equiv_columns(steps: pa.Table, contexts: Mapping[str, EquivContext], scorer: str) -> pa.Table:
    """`steps` plus equiv_precision/recall/f1, equiv_cwd and equiv_skipped, from each row's stored units.

    The context of a step (its working directory) comes from `contexts` by step key; a step
    missing there whose units depend on the working directory (a relative `cd`) gets NULL metrics
    and equiv_skipped "equiv needs the replay" (Compare, which has the step's screen, would give
    another number); one missing there otherwise is normalised without one. A step past the equiv
    limits gets NULL metrics and equiv_skipped saying why.
    """
    rows = steps.select(
        ["step_key", "pred_command_units", "ref_command_units", "first_cmd_exact", "command_precision",
         "command_recall", "command_f1"]
    ).to_pylist()
    empty = EquivContext()
    ctxs = [contexts.get(r["step_key"], empty) for r in rows]
    units = [(r["pred_command_units"] or [], r["ref_command_units"] or []) for r in rows]
    # no screen for this step (no replay known, or a key it lacks) and units whose meaning needs one
    blind = [r["step_key"] not in contexts and too_large(p, q) is None and depends_on_cwd(p, q)
             for r, (p, q) in zip(rows, units)]
    todo = [i for i, b in enumerate(blind) if not b]
    computed = equiv_batch([(*units[i], ctxs[i]) for i in todo], harness=[_stored_metrics(rows[i]) for i in todo],
                           scorer=scorer)
    metrics: list[Any] = [None] * len(rows)
    for i, m in zip(todo, computed):
        metrics[i] = m
    columns = {
        "equiv_precision": [m and m.precision for m in metrics],
        "equiv_recall": [m and m.recall for m in metrics],
        "equiv_f1": [m and m.f1 for m in metrics],
        "equiv_cwd": [c.cwd for c in ctxs],
        "equiv_skipped": [NEEDS_REPLAY if b else None if m is not None else skip_reason(*u, c)
                          for m, b, u, c in zip(metrics, blind, units, ctxs)],
    }
    for field in EQUIV_STEP_SCHEMA:
        steps = steps.append_column(field, pa.array(columns[field.name], type=field.type))
    return steps


def run_equiv_fields(steps: pa.Table, score: float | None) -> dict[str, Any]:
    """avg_equiv_f1, equiv_score (x100, 2 decimals) and spelling_gap = equiv_score - score (points);
    all None when a step was skipped (a mean over some of the steps would be a wrong number)."""
    n = steps.num_rows
    if not n or steps.column("equiv_f1").null_count:
        return {"avg_equiv_f1": None, "equiv_score": None, "spelling_gap": None}
    equiv = sum(steps.column("equiv_f1").to_pylist()) / n
    equiv_score = round(100 * equiv, 2)
    gap = None if score is None or math.isnan(score) else round(equiv_score - score, 2)
    return {"avg_equiv_f1": equiv, "equiv_score": equiv_score, "spelling_gap": gap}


@lru_cache(maxsize=4)
def _contexts_of_file(path: str, mtime: float) -> dict[str, EquivContext]:
    from lab.data import load_replay

    return replay_contexts(load_replay(path, mode="all", lenient=True).steps)  # legacy runs score every step


def replay_equiv_contexts(settings: Any) -> dict[str, EquivContext]:
    """Step key -> working directory context, from the replay the lab is configured with (its
    local file or the cached download); {} when there is none or it cannot be read."""
    from lab.data import cached_replay_path

    candidates = [getattr(settings, "replay_path", None)]
    url, cache = getattr(settings, "replay_url", None), getattr(settings, "cache_dir", None)
    if url and cache:
        candidates.append(str(cached_replay_path(url, cache)))
    for candidate in candidates:
        if not candidate or candidate.startswith(("http://", "https://")):
            continue
        p = Path(candidate).expanduser()
        if p.is_file() and p.suffix == ".jsonl":
            try:
                return _contexts_of_file(str(p.resolve()), p.stat().st_mtime)
            except Exception:  # a broken replay file costs only the cwd of `cd` targets
                return {}
    return {}
