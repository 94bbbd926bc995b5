"""What-if edits: edit a step's context, re-run it on engines, keep the answers apart
from every run's score."""
from lab.whatif.apply import apply_edit, apply_whatif, field_spans, field_text
from lab.whatif.diff import diff_html, unified_diff
from lab.whatif.edit import EditError, FieldEdit, WhatIf
from lab.whatif.run import WhatIfResult, run_whatif
from lab.whatif.store import DuckWhatIfStore, SessionWhatIfStore, export_jsonl, export_records
from lab.whatif.validate import check_whatif, limits

__all__ = [
    "DuckWhatIfStore", "EditError", "FieldEdit", "SessionWhatIfStore", "WhatIf", "WhatIfResult", "apply_edit",
    "apply_whatif", "check_whatif", "diff_html", "export_jsonl", "export_records", "field_spans", "field_text",
    "limits", "run_whatif", "unified_diff",
]
