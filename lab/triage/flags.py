"""Materialize per-step triage fields (failure kind, strict F1, risk flags) into `step_flags`."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

from lab.scoring.metrics import score_units
from lab.tb2lite import CORRECTED, LEGACY
from lab.triage.db import ensure_triage_schema, query_dicts, query_rows, write_transaction
from lab.triage.risk import RiskPatterns, assess_step, load_risk_patterns
from lab.triage.taxonomy import classify_output

# Characters of raw output kept in stored result files (SPEC §8): a preview this long may be cut.
PREVIEW_LIMITS = {"corrected_303": 1200, "legacy_386": 500}
STEP_FLAG_COLUMNS = (
    "run_id", "step_key", "failure_kind", "invalid_json", "prose_around_json", "missing_fields",
    "wrong_types", "empty_commands", "truncated", "units_from_fallback", "text_complete", "strict_f1",
    "risky", "hang", "no_newline", "long_duration", "flags",
)  # fmt: skip
# Boolean step_flags columns a slice can require (see slices.SliceSpec.flags).
BOOLEAN_FLAGS = (
    "invalid_json", "prose_around_json", "missing_fields", "wrong_types", "empty_commands", "truncated",
    "units_from_fallback", "risky", "hang", "no_newline", "long_duration",
)  # fmt: skip

_STEPS_SQL = """
SELECT s.run_id, s.step_key, s.raw_output, s.pred_preview, s.finish_reason, s.valid_json,
       s.n_pred_units, s.pred_command_units, s.ref_command_units, s.command_f1, r.scoring_version
FROM steps s JOIN runs r ON r.run_id = s.run_id
WHERE list_contains(?, s.run_id)
"""


def flag_row(row: dict, patterns: RiskPatterns) -> dict:
    """The step_flags row of one steps row (dict with the columns of `_STEPS_SQL`)."""
    version = row.get("scoring_version") or "corrected_303"
    raw = row.get("raw_output")
    preview = row.get("pred_preview") or ""
    text_complete = raw is not None or len(preview) < PREVIEW_LIMITS.get(version, 1200)
    text = raw if raw is not None else preview
    failures = classify_output(
        text,
        row.get("finish_reason"),
        text_complete=text_complete,
        stored_valid_json=row.get("valid_json"),
        stored_pred_units=row.get("n_pred_units"),
    )
    units = list(row.get("pred_command_units") if row.get("pred_command_units") is not None else [])
    # Strict parsing keeps units only from valid JSON: fallback units are dropped, i.e. no unit.
    if failures.units_from_fallback:
        ref_units = list(row.get("ref_command_units") if row.get("ref_command_units") is not None else [])
        scorer = LEGACY if version.startswith("legacy") else CORRECTED
        strict_f1 = score_units([], ref_units, scorer).f1
    else:
        strict_f1 = row.get("command_f1")
    risk = assess_step(units, failures.commands, patterns)
    return {
        "run_id": row["run_id"], "step_key": row["step_key"], "failure_kind": failures.kind,
        "invalid_json": failures.invalid_json, "prose_around_json": failures.prose_around_json,
        "missing_fields": failures.missing_fields, "wrong_types": failures.wrong_types,
        "empty_commands": failures.empty_commands, "truncated": failures.truncated,
        "units_from_fallback": failures.units_from_fallback, "text_complete": failures.text_complete,
        "strict_f1": strict_f1, "risky": risk.risky, "hang": risk.hang, "no_newline": risk.no_newline,
        "long_duration": risk.long_duration, "flags": risk.flags,
    }  # fmt: skip


def stale_run_ids(store: Any) -> list[str]:
    """Runs whose steps are not (all) in step_flags yet."""
    rows = query_rows(
        store,
        """SELECT s.run_id FROM steps s
           LEFT JOIN step_flags f ON f.run_id = s.run_id AND f.step_key = s.step_key
           GROUP BY s.run_id HAVING count(f.step_key) <> count(*)
           UNION SELECT DISTINCT f.run_id FROM step_flags f ANTI JOIN runs r ON r.run_id = f.run_id""",
    )
    return sorted(r[0] for r in rows)


def refresh_step_flags(
    store: Any, run_ids: Sequence[str] | None = None, patterns: RiskPatterns | None = None
) -> int:
    """Recompute step_flags for `run_ids` (default: every run missing or incomplete there).

    Rows of runs that no longer exist are dropped. Returns the number of steps written.
    """
    ensure_triage_schema(store)
    pats = patterns or load_risk_patterns()
    targets = list(run_ids) if run_ids is not None else stale_run_ids(store)
    if not targets:
        return 0
    rows = [flag_row(r, pats) for r in query_dicts(store, _STEPS_SQL, [targets])]
    frame = pd.DataFrame(rows, columns=list(STEP_FLAG_COLUMNS))
    with write_transaction(store) as cur:
        cur.execute("DELETE FROM step_flags WHERE list_contains(?, run_id)", [targets])
        cur.execute("DELETE FROM step_flags WHERE run_id NOT IN (SELECT run_id FROM runs)")
        if len(frame):
            # DuckDB reads a column's type from a sample of rows: a `flags` list empty in every sampled row would
            # be typed NULL[] and refuse the first non-empty one further down
            cur.execute(f"SET pandas_analyze_sample = {max(len(frame), 1000):d}")
            cur.register("_new_step_flags", frame)
            cols = ", ".join(STEP_FLAG_COLUMNS)
            cur.execute(f"INSERT INTO step_flags ({cols}) SELECT {cols} FROM _new_step_flags")
            cur.unregister("_new_step_flags")
    return len(frame)
