"""The Triage tab's handlers: what each of its events does, as functions of the lab's context (and the
widgets' values) that tests call without a browser; lab.ui.triage.tab lays out the tab and wires them."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import gradio as gr
import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.scoring.equiv import NEEDS_REPLAY
from lab.triage import (
    SliceSpec, add_annotation, annotation_badges_html, annotations_for, count_slice, disagreement,
    export_preference_pairs, export_slice, flip_summary, flip_table, list_slices, load_slice, run_taxonomy,
    save_slice, slice_steps, tags_in_use,
)  # fmt: skip
from lab.ui.shell.equiv_status import STATE_TEXT, STEP_STATES, mark_equiv_cells, mark_step_reasons
from lab.ui.shell.html_text import esc
from lab.ui.shell.links import page_url
from lab.ui.triage.figures import slice_figures
from lab.ui.triage.filters import FILTER_FIELDS, inputs_from_spec, load_choices, spec_from_inputs
from lab.ui.triage.paired_view import paired_view
from lab.ui.triage.series_picker import series_choices
from lab.workspace import LabContext

PAGE_SIZE = 50
PICKERS = ("run_ids", "source_groups", "task_ids", "tags")  # the filters whose choices come from the store
NO_STEP = "Click a row of the table to select a step."


def slice_page(ctx: LabContext, spec: SliceSpec, page: int) -> tuple[pd.DataFrame, str, int]:
    """One page of the slice, a summary line, and the page number actually shown (1-based)."""
    total = count_slice(ctx.store, spec)
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(max(1, int(page or 1)), pages)
    df = slice_steps(ctx.store, spec, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    if "flags" in df:
        # a run no flags were computed for yet (imported by `results import`) has none: NULL, not a list
        df["flags"] = df["flags"].map(lambda x: ", ".join(x) if isinstance(x, (list, tuple, np.ndarray)) else "")
    df, note = _equiv_states(ctx, spec, df)
    return df, f"**{total}** steps · page {page} of {pages}{note}", page


def _equiv_states(ctx: LabContext, spec: SliceSpec, df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The page with "equiv pending" (or "equiv failed") in the equiv cells of runs whose equiv
    columns are not filled yet, and a note saying so (equiv filters cannot see those steps yet)."""
    from lab.store.equiv_fill import unfilled_states

    if "equiv_skipped" in df.columns:  # a step past the equiv limits, or needing the replay: its cells say so
        reasons = df.pop("equiv_skipped")
        if ctx.replay is not None and reasons.eq(NEEDS_REPLAY).any():
            ctx.kick_equiv()  # filled by another process without this lab's replay: filled again with it
        df = mark_step_reasons(df, ("equiv_f1", "spelling_gap"), reasons, ctx.replay.by_key if ctx.replay else None)
    states = unfilled_states(ctx.store)
    if not states:
        return df, ""
    pending = sorted(r for r, s in states.items() if s == "pending" and (not spec.run_ids or r in spec.run_ids))
    if pending:
        ctx.kick_equiv()  # also fills runs another process left pending
    if "run_id" in df.columns:
        df = mark_equiv_cells(df, ("equiv_f1", "spelling_gap"), df["run_id"].map(states), STEP_STATES)
    if not pending:
        return df, ""
    effects = []
    if (spec.equiv_f1_min, spec.equiv_f1_max, spec.spelling_gap_min) != (None, None, None):
        effects.append("the equiv filters skip their steps")
    if spec.order_by in ("equiv_f1", "spelling_gap"):
        effects.append("the equiv sort puts them last")
    until = f"; until then {' and '.join(effects)}" if effects else ""
    runs = f"{len(pending)} run{'s' if len(pending) != 1 else ''}"
    return df, f" · {STATE_TEXT['pending']} for {runs} (being filled in the background{until})"


def diff_message(rows: int, view: str) -> str:
    """What the baseline-vs-candidate table shows, or why it is empty."""
    if rows:
        return f'<div class="lab-muted">{rows} step{"s" if rows != 1 else ""} ({esc(view)})</div>'
    why = {"improved": "no step where the candidate scores higher than the baseline",
           "regressed": "no step where the candidate scores lower than the baseline",
           "toward_reference": "no step where the candidate's model gives the reference a lower NLL per token "
                               "(both models need a score-reference run)"}.get(
        view, "no step where the two runs score differently (or no step in common)")
    return f'<div class="lab-empty" data-empty="1">{esc(why)}</div>'


def _export_dir() -> Path:
    from lab.ui.shell.exports import (
        EXPORTS,  # short-lived, swept folders (no /tmp/triage-export-* left behind)
    )

    return EXPORTS.new_dir()


# ---- the slice: filters, pages, the shared link ------------------------------------------------------
def show_slice(ctx: LabContext, page_no: Any, *values: Any) -> tuple:
    """The slice's page `page_no`: table, its frame, summary line, page shown, the two figures, no export."""
    try:
        spec = spec_from_inputs(*values)
        df, line, page_no = slice_page(ctx, spec, page_no)
        f1, kinds = slice_figures(ctx, spec)
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), f"⚠ {exc}", gr.update(), gr.update(), gr.update(), gr.update()
    return df, df, line, page_no, f1, kinds, ""


def apply_filters(ctx: LabContext, *values: Any) -> tuple:
    """The slice's first page."""
    return show_slice(ctx, 1, *values)


def turn_page(ctx: LabContext, step: int, page_no: Any, *values: Any) -> tuple:
    """The page `step` pages from `page_no` (-1: previous, 1: next)."""
    return show_slice(ctx, (page_no or 1) + step, *values)


def fresh_choices(ctx: LabContext) -> dict[str, list]:
    """The store's choices of the pickers now ({} when the store cannot say)."""
    try:
        c = load_choices(ctx)
    except LabError:
        return {}
    return {"run_ids": c.runs, "source_groups": c.source_groups, "task_ids": c.task_ids, "tags": c.tags}


def picker_updates(ctx: LabContext, fresh: dict[str, list], pair: tuple = (None, None)) -> list:
    """Baseline, candidate, the flip table's runs and the series picker, with the runs of `fresh`; the baseline
    and candidate set to `pair` where given (a link's)."""
    runs = fresh.get("run_ids")
    same = [gr.update() if runs is None else gr.update(choices=runs) for _ in range(3)]
    for i, run_id in enumerate(pair):
        if run_id:
            same[i] = gr.update(choices=runs, value=run_id) if runs is not None else gr.update(value=run_id)
    return [*same, gr.update(choices=series_choices(ctx)) if runs is not None else gr.update()]


def load_page(ctx: LabContext, request: gr.Request) -> list:
    """Read the shared-slice link (its pair too: lab.ui.triage.link), and the pickers' choices afresh (runs
    added since start); last the line about the link's pair and the pair's accordion."""
    from lab.ui.triage.link import pair_from_request

    base = ""
    spec = SliceSpec()
    try:
        if request is not None:
            base = page_url(request)
            spec = SliceSpec.from_query(request.query_params)
    except LabError as exc:
        gr.Warning(esc(f"shared slice link: {exc}"))  # the link's own text: escaped, never markup
    values = dict(zip(FILTER_FIELDS, inputs_from_spec(spec)))
    fresh = fresh_choices(ctx)
    out = [gr.update(choices=fresh[name], value=values[name]) if name in fresh else values[name]
           for name in FILTER_FIELDS]
    runs = [run_id for _, run_id in fresh.get("run_ids") or []]
    pair, note, accordion = pair_from_request(ctx, request, runs)
    return [base, *out, *picker_updates(ctx, fresh, tuple(pair)), note, accordion]


def refresh_pickers(ctx: LabContext) -> list:
    """The tab opened again: every run picker lists the runs in the store now."""
    fresh = fresh_choices(ctx)
    return [gr.update() if name not in fresh else gr.update(choices=fresh[name]) for name in PICKERS] + \
        picker_updates(ctx, fresh)


def save_current_slice(ctx: LabContext, name: str, author_name: str, *values: Any) -> Any:
    """Save the filters' slice under `name`; the saved-slices picker then shows it."""
    try:
        save_slice(ctx.store, name, spec_from_inputs(*values), author=author_name or "")
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update()
    gr.Info(f"slice '{name.strip()}' saved")
    return gr.update(choices=list_slices(ctx.store), value=name.strip())


def open_saved_slice(ctx: LabContext, name: str) -> list:
    """The filters' values of the saved slice `name`."""
    try:
        spec = load_slice(ctx.store, name)
    except LabError as exc:
        gr.Warning(str(exc))
        return [gr.update() for _ in FILTER_FIELDS]
    return inputs_from_spec(spec)


def export_filtered(ctx: LabContext, fmt: str, *values: Any) -> str:
    """The filters' slice as a CSV or JSONL file: its download link, or "" after a warning."""
    from lab.ui.shell.exports import download_html

    try:
        spec = spec_from_inputs(*values)
        return download_html(export_slice(ctx.store, spec, _export_dir() / f"triage-slice.{fmt}", fmt))
    except LabError as exc:
        gr.Warning(str(exc))
        return ""


def count_failures(ctx: LabContext, ids: Sequence[str] | None) -> pd.DataFrame:
    """The parse-failure taxonomy of the runs `ids` (all runs when none)."""
    return run_taxonomy(ctx.store, list(ids or []) or None)


# ---- the selected step -----------------------------------------------------------------------------
def row_of(df: pd.DataFrame | None, evt: gr.SelectData) -> int | None:
    """The table row a select event names, or None when the table has no such row."""
    row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
    return None if df is None or len(df) <= row else row


def step_badges(ctx: LabContext, sel: tuple[str, str] | None) -> str:
    return annotation_badges_html(annotations_for(ctx.store, *sel)) if sel else ""


def select_step(ctx: LabContext, df: pd.DataFrame, evt: gr.SelectData) -> tuple:
    """The step of the clicked row: (run_id, step_key), its line and its tags and notes."""
    row = row_of(df, evt)
    if row is None:
        return None, NO_STEP, ""
    rec = df.iloc[row]
    sel = (str(rec["run_id"]), str(rec["step_key"]))
    md = f"**{rec.get('run', sel[0])}** · step `{sel[1]}` · F1 {rec['command_f1']}"
    return sel, md, step_badges(ctx, sel)


def tag_step(ctx: LabContext, sel: tuple[str, str] | None, tag_text: str, note_text: str, author_name: str) -> tuple:
    """Tag (and note) the selected step: its badges, an empty tag box, the tags in use."""
    if not sel:
        gr.Warning("select a step in the table first")
        return gr.update(), gr.update(), gr.update()
    try:
        add_annotation(ctx.store, sel[0], sel[1], tag_text, note_text or "", author_name or "")
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), gr.update()
    return step_badges(ctx, sel), "", gr.update(choices=tags_in_use(ctx.store))


def open_step(open_in_compare: Any, sel: tuple[str, str] | None, request: gr.Request) -> tuple:
    """Open the selected step's run in Compare at that step."""
    if not sel:
        gr.Warning("select a step in the table first")
        return tuple(gr.update() for _ in open_in_compare.outputs)
    return open_in_compare([sel[0]], sel[1], request)


def open_row(open_in_compare: Any, df: pd.DataFrame | None, evt: gr.SelectData, request: gr.Request | None,
             runs: Callable[[pd.Series], list[str]]) -> tuple:
    """Open the clicked row's step in Compare with the runs `runs(row)` names."""
    row = row_of(df, evt)
    if row is None:
        return tuple(gr.update() for _ in open_in_compare.outputs)
    return open_in_compare(runs(df.iloc[row]), str(df.iloc[row]["step_key"]), request)


# ---- baseline vs candidate, flips ------------------------------------------------------------------
def picked_pair(ctx: LabContext, base: str | None, cand: str | None) -> tuple[str, str]:
    """The run ids of the baseline and candidate pickers, whose values may be typed (a run id or a name);
    LabError when one is not found, or both name the same run (never a run compared with itself)."""
    from lab.store.run_lookup import find_run

    ids = []
    for role, value in (("baseline", base), ("candidate", cand)):
        text = str(value or "").strip()
        if not text:
            raise LabError("pick a baseline and a candidate run")
        with ctx.store_session() as store:  # LabError saying why when the store is not open
            try:
                ids.append(find_run(store, text))
            except LabError:
                shown = text if len(text) <= 80 else f"{text[:80]}…"
                raise LabError(f"{role} '{shown}': no run of that id or name is in the store; pick one from the "
                               "list") from None
    if ids[0] == ids[1]:
        raise LabError(f"baseline and candidate are the same run ({ids[0]}): pick another candidate")
    return ids[0], ids[1]


def compare_pair(ctx: LabContext, base: str | None, cand: str | None, which: str) -> tuple:
    """The steps where baseline and candidate differ (`which` way), the line about them, Δ with its
    interval, and the tasks that carry it."""
    try:
        base, cand = picked_pair(ctx, base, cand)
        df = disagreement(ctx.store, base, cand, which)
        header, tasks = paired_view(ctx, base, cand)
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update(), gr.update(), gr.update()
    return df, diff_message(len(df), which), header, tasks


def open_pair_row(open_in_compare: Any, df: pd.DataFrame, base: str | None, cand: str | None,
                  evt: gr.SelectData, request: gr.Request) -> tuple:
    """Open the clicked step of the baseline-vs-candidate table in Compare with both runs."""
    return open_row(open_in_compare, df, evt, request, lambda rec: [r for r in (base, cand) if r])


def export_pairs(ctx: LabContext, base: str | None, cand: str | None, min_margin: Any, *values: Any) -> str:
    """Preference pairs (DPO) of baseline vs candidate within the filters' slice, as a JSONL file: its download
    link, or "" after a warning."""
    from lab.ui.shell.exports import download_html

    try:
        base, cand = picked_pair(ctx, base, cand)
        spec = spec_from_inputs(*values)
        spec.run_ids = []  # the pair's two runs replace the slice's runs
        messages = {s.key: s.messages for s in ctx.replay.steps} if ctx.replay else None
        path = _export_dir() / "preference-pairs.jsonl"
        return download_html(export_preference_pairs(ctx.store, base, cand, path, spec=spec,
                                                     min_margin=float(min_margin or 0), messages_by_key=messages))
    except LabError as exc:
        gr.Warning(str(exc))
        return ""


def show_flips(ctx: LabContext, ids: Sequence[str] | None, thr: Any) -> tuple:
    """The flip table of a checkpoint series: counts, and the steps that flipped."""
    try:
        flips = flip_table(ctx.store, list(ids or []), float(thr))
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update(), gr.update()
    return flip_summary(flips), flips.drop(columns=["pair"])


def open_flip_row(open_in_compare: Any, df: pd.DataFrame, evt: gr.SelectData, request: gr.Request) -> tuple:
    """Open the clicked flip in Compare with the runs before and after it."""
    return open_row(open_in_compare, df, evt, request, lambda rec: [rec["from_run_id"], rec["to_run_id"]])
