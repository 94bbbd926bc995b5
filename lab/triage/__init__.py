"""Failure triage: slices over steps, run-vs-run disagreement, parse-failure taxonomy,
risky keystrokes, tags and notes, and exports (CSV, JSONL, DPO preference pairs)."""
from lab.triage.annotations import (
    Annotation,
    add_annotation,
    annotation_badges_html,
    annotations_for,
    annotations_table,
    delete_annotation,
    step_badges_html,
    tags_in_use,
)
from lab.triage.compare_runs import disagreement, flip_summary, flip_table, order_as_series
from lab.triage.db import SCHEMA_PATH, ensure_triage_schema
from lab.triage.export import export_preference_pairs, export_slice, preference_pairs, slice_records
from lab.triage.flags import BOOLEAN_FLAGS, refresh_step_flags, stale_run_ids
from lab.triage.risk import StepRisk, assess_step, command_risks, load_risk_patterns, unit_risks
from lab.triage.saved import delete_slice, list_slices, load_slice, save_slice
from lab.triage.slices import SliceSpec, count_slice, slice_steps, slice_where
from lab.triage.taxonomy import FAILURE_KINDS, OutputFailures, classify_output, run_taxonomy

try:  # let every store open create the triage tables too (lab.store's extra-DDL registry)
    from lab.store.db import register_schema

    register_schema(SCHEMA_PATH)
except ImportError:  # pragma: no cover - the store package is part of the lab
    pass

__all__ = [
    "Annotation", "BOOLEAN_FLAGS", "FAILURE_KINDS", "OutputFailures", "SliceSpec", "StepRisk",
    "add_annotation", "annotation_badges_html", "annotations_for", "annotations_table", "assess_step",
    "classify_output", "command_risks", "count_slice", "delete_annotation", "delete_slice", "disagreement",
    "ensure_triage_schema", "export_preference_pairs", "export_slice", "flip_summary", "flip_table",
    "list_slices", "load_risk_patterns", "load_slice", "order_as_series", "preference_pairs",
    "refresh_step_flags", "run_taxonomy", "save_slice", "slice_records", "slice_steps", "slice_where",
    "stale_run_ids", "step_badges_html", "tags_in_use", "unit_risks",
]  # fmt: skip
