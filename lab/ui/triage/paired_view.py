"""Triage's baseline vs candidate: the run-level comparison with its intervals above the step table, and
the tasks that carry the difference (lab.analysis.run_pairs)."""
from __future__ import annotations

import pandas as pd

from lab.workspace import LabContext
from lab.ui.shell.paired_html import comparison_html


def paired_view(ctx: LabContext, baseline: str, candidate: str) -> tuple[str, pd.DataFrame]:
    """(header HTML, per-task shares of the score difference) for two stored runs (LabError passes up); the
    shares are signed as the block's Δ is (+1.234 / −1.234, a real minus sign)."""
    from lab.analysis.run_pairs import metric_spec, signed, task_breakdown
    from lab.analysis.shared_views import pair_comparison

    comparison = pair_comparison(ctx.store, baseline, candidate, hold=ctx.store_session, admit=ctx.pair_admission)
    tasks = task_breakdown(comparison, "score")
    digits = metric_spec("score").digits + 1
    tasks["contribution"] = [signed(float(v), digits) for v in tasks["contribution"]]
    return comparison_html(comparison, elem_id="triage-pair"), tasks
