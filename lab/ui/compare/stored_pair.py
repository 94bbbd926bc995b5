"""Compare with two stored runs (or more) as columns: the run-level difference with its 95 % interval sits
above the per-step F1s, so one step is never taken for the verdict. The first stored column is the
baseline; with several others their intervals are simultaneous (lab.store.paired)."""
from __future__ import annotations

from lab.errors import LabError
from lab.workspace import EngineEntry, LabContext
from lab.ui.shell.html_text import esc
from lab.ui.shell.paired_html import comparison_html, hint_html


def stored_run_ids(ctx: LabContext, entries: list[EngineEntry]) -> list[str]:
    """The store's run ids of the stored columns, in column order (columns whose file is not a stored run
    are left out)."""
    out = []
    for entry in entries:
        path = entry.stored_path
        run_id = ctx.stored_run_id(path) if path is not None else None
        if run_id and run_id not in out:
            out.append(run_id)
    return out


def stored_pair_html(ctx: LabContext, entries: list[EngineEntry]) -> str:
    """The run-level block for the stored columns ("" with fewer than two)."""
    from lab.store.paired import cached, compare_against, compare_runs, delta_text

    ids = stored_run_ids(ctx, entries)
    if len(ids) < 2 or ctx.store is None:
        return ""
    try:
        with ctx._store_lock:
            if len(ids) == 2:
                pair = cached(ctx.store, ("pair", *ids), lambda: compare_runs(ctx.store, ids[0], ids[1]))
                return comparison_html(pair, elem_id="lab-run-delta")
            found = cached(ctx.store, ("against", *ids), lambda: compare_against(ctx.store, ids[0], ids[1:]))
            base = ctx.store.scalar("SELECT display_name FROM runs WHERE run_id = ?", [ids[0]])  # the lock is held
    except LabError as exc:
        return f'<div class="lab-pair lab-muted" id="lab-run-delta">run-level difference: {esc(exc)}</div>'
    rows = "".join(
        f'<li data-run="{esc(f.run_id)}"><b>{esc(f.name)}</b>: Δ score {esc(delta_text(f.difference, 2, f.note))}'
        f'{" · " + esc(f.difference.verdict) if f.difference is not None and f.difference.ci else ""}'
        f'{_settings_cell(f.settings)}</li>'
        for f in found)
    label = next((f.difference.adjustment for f in found if f.difference is not None and f.difference.ci), "")
    hint = next((h for h in (hint_html(f.difference) for f in found) if h), "")
    return (f'<div class="lab-pair" id="lab-run-delta"><div class="lab-pair-title">whole runs against the first '
            f'stored column, <b>{esc(base)}</b> (95 %{", " + esc(label) if label else ""}):</div><ul>{rows}</ul>'
            f'{hint}</div>')


def _settings_cell(settings) -> str:
    """" · settings: …" beside a run's Δ when its settings differ from the baseline's ("" when they do not)."""
    if settings is None or not settings.differ:
        return ""
    cls = "lab-pair-mismatch" if settings.changing else "lab-muted"
    return f' · <span class="{cls}">settings: {esc(settings.short())}</span>'

