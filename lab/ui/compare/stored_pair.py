"""Compare with two stored runs (or more) as columns: the run-level difference with its 95 % interval sits
above the per-step F1s, so one step is never taken for the verdict. The baseline is the stored column the page
picks (the first one until it picks another). Two columns are the pair's block, the one Triage shows; with more,
each other column against the baseline with intervals simultaneous over those that have one (max-T; the one
left is pairwise), the computation Results and `python -m lab compare BASE A B …` make (lab.analysis.judge)."""
from __future__ import annotations

from dataclasses import dataclass, field

from lab.errors import LabError
from lab.workspace import EngineEntry, LabContext
from lab.ui.shell.html_text import esc
from lab.ui.shell.paired_html import comparison_html, hint_html

AGAINST_NOTE = ("Δ score = column − baseline over their common steps; the intervals resample tasks and hold together "
                "over the columns that have one (max-T; the one left alone is pairwise), as Results against the same "
                "baseline and `python -m lab compare BASELINE A B …` give them; P(best) and regret on the baseline's "
                "steps.")


@dataclass(frozen=True)
class RunBlock:
    """The run-level block: the stored columns a baseline may be picked from ((column name, run id), in column
    order), the baseline it compares against (None with fewer than two) and its HTML ("" then)."""

    choices: list[tuple[str, str]] = field(default_factory=list)
    baseline: str | None = None
    html: str = ""


def stored_columns(ctx: LabContext, entries: list[EngineEntry]) -> list[tuple[str, str]]:
    """(column name, run id) of the stored columns, in column order, each run once (columns whose file is not a
    stored run are left out)."""
    out: list[tuple[str, str]] = []
    for entry in entries:
        path = entry.stored_path
        run_id = ctx.stored_run_id(path) if path is not None else None
        if run_id and run_id not in (r for _, r in out):
            out.append((entry.name, run_id))
    return out


def stored_run_ids(ctx: LabContext, entries: list[EngineEntry]) -> list[str]:
    """The store's run ids of the stored columns, in column order."""
    return [run_id for _, run_id in stored_columns(ctx, entries)]


def run_block(ctx: LabContext, entries: list[EngineEntry], baseline: str | None = None) -> RunBlock:
    """The block for the stored columns against `baseline` (a stored column's run id; the first column when it
    is none of them); computed outside the store's lock and kept for every visitor until the store changes
    (lab.analysis.shared_views)."""
    columns = stored_columns(ctx, entries)
    ids = [run_id for _, run_id in columns]
    if len(ids) < 2 or ctx.store is None:
        return RunBlock(columns)
    base = baseline if baseline in ids else ids[0]
    return RunBlock(columns, base, block_html(ctx, [base, *(r for r in ids if r != base)]))


def stored_pair_html(ctx: LabContext, entries: list[EngineEntry], baseline: str | None = None) -> str:
    """The run-level block's HTML ("" with fewer than two stored columns)."""
    return run_block(ctx, entries, baseline).html


def block_html(ctx: LabContext, ids: list[str]) -> str:
    """The block for runs `ids`, the first the baseline: the pair's comparison, or each against the first."""
    from lab.analysis.shared_views import against_first, pair_comparison

    try:
        if len(ids) == 2:
            pair = pair_comparison(ctx.store, ids[0], ids[1], hold=ctx.store_session, admit=ctx.pair_admission)
            return comparison_html(pair, elem_id="lab-run-delta")
        found, best = against_first(ctx.store, ids, hold=ctx.store_session, admit=ctx.stats_admission)
        with ctx.store_session() as store:
            base = store.scalar("SELECT display_name FROM runs WHERE run_id = ?", [ids[0]])
    except LabError as exc:
        return f'<div class="lab-pair lab-muted" id="lab-run-delta">run-level difference: {esc(exc)}</div>'
    return against_html(base, found, best)


def against_html(base: str, found: list, best) -> str:
    """Several stored columns against the baseline: each one's Δ score [interval], verdict in words, and every
    column's P(best) and expected regret."""
    from lab.analysis.run_pairs import delta_text, points_text, verdict_words

    chance = dict(zip(best.run_ids, zip(best.p_best, best.expected_regret)))

    def best_of(run_id: str) -> str:
        p, regret = chance.get(run_id, (None, None))
        return "" if p is None else f" · P(best) {p:.2f}, expected regret {points_text(regret)}"

    rows = "".join(
        f'<li data-run="{esc(f.run_id)}"><b>{esc(f.name)}</b>: Δ score {esc(delta_text(f.difference, 2, f.note))}'
        f'{" · " + esc(verdict_words(f.difference)) if f.difference is not None and f.difference.ci else ""}'
        f'{esc(best_of(f.run_id))}{_settings_cell(f.settings)}</li>' for f in found)
    label = next((f.difference.adjustment for f in found if f.difference is not None and f.difference.ci), "")
    first = best_of(best.run_ids[0])
    note = f'<div class="lab-muted">{esc(best.note)}</div>' if best.note else ""
    hint = next((h for h in (hint_html(f.difference) for f in found) if h), "")
    return (f'<div class="lab-pair" id="lab-run-delta"><div class="lab-pair-title">whole runs against the baseline '
            f'<b>{esc(base)}</b> (95 %{", " + esc(label) if label else ""}){esc(first)}:</div>'
            f'<ul>{rows}</ul>{note}{hint}<div class="lab-muted">{esc(AGAINST_NOTE)}</div></div>')


def _settings_cell(settings) -> str:
    """" · settings: …" beside a run's Δ when its settings differ from the baseline's ("" when they do not)."""
    if settings is None or not settings.differ:
        return ""
    cls = "lab-pair-mismatch" if settings.changing else "lab-muted"
    return f' · <span class="{cls}">settings: {esc(settings.short())}</span>'

