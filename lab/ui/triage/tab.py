"""The Triage tab: slice steps, compare a baseline with a candidate, flips, taxonomy, tags, exports."""
from __future__ import annotations

from pathlib import Path

import gradio as gr
import numpy as np
import pandas as pd

from lab.errors import LabError
from lab.triage import (
    BOOLEAN_FLAGS, FAILURE_KINDS, SliceSpec, add_annotation, annotation_badges_html, annotations_for,
    count_slice, disagreement, export_preference_pairs, export_slice, flip_summary, flip_table, list_slices,
    load_risk_patterns, load_slice, run_taxonomy, save_slice, slice_steps, tags_in_use,
)  # fmt: skip
from lab.triage.compare_runs import DEFAULT_RIGHT_THRESHOLD, DISAGREEMENT_VIEWS
from lab.triage.slices import ORDER_COLUMNS, TASK_COMPLETE_FILTERS
from lab.workspace import LabContext
from lab.scoring.equiv import NEEDS_REPLAY
from lab.ui.shell.equiv_status import STATE_TEXT, STEP_STATES, mark_equiv_cells, mark_step_reasons
from lab.ui.shell.html_text import esc
from lab.ui.triage.paired_view import paired_view
from lab.ui.triage.series_picker import build_series_picker, series_choices, wire_series_picker
from lab.ui.triage.stability import build_stability_panel
from lab.ui.triage.figures import slice_figures
from lab.ui.triage.filters import ANY, FILTER_FIELDS, Choices, inputs_from_spec, load_choices, spec_from_inputs

PAGE_SIZE = 50
BUCKETS = ["early", "mid", "late"]


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


def share_url(base: str, spec: SliceSpec) -> str:
    """A link that reopens the lab with this slice (read on page load)."""
    query = spec.to_query()
    return f"{base}?{query}" if query else base


def page_url(request: gr.Request) -> str:
    """The page's own address without its query (the browser's Referer; the queue URL is not it)."""
    referer = (request.headers or {}).get("referer") if hasattr(request, "headers") else None
    return str(referer or request.base_url).split("?")[0]


def _export_dir() -> Path:
    from lab.ui.shell.exports import (
        EXPORTS,  # short-lived, swept folders (no /tmp/triage-export-* left behind)
    )

    return EXPORTS.new_dir()


def build_triage_tab(ctx: LabContext, open_in_compare) -> None:
    """Mount the Triage tab. `open_in_compare(run_ids, step_key)` switches to Compare at a step."""
    try:
        choices = load_choices(ctx)
        problem = None if ctx.store is not None else (ctx.store_error or "the results database is not open")
    except LabError as exc:
        choices, problem = Choices([], [], [], [], []), str(exc)
    risk_names = [f"{p.category}:{p.name}" for p in load_risk_patterns().patterns]

    with gr.Tab("Triage", id="triage") as triage_tab:
        if problem:
            gr.Markdown(f"**Triage needs the results database:** {problem}")
            return
        base_url = gr.State("")
        page_df = gr.State(pd.DataFrame())
        with gr.Accordion("Filters", open=True):
            with gr.Row():
                run_ids = gr.Dropdown(choices.runs, multiselect=True, label="Runs", elem_id="triage-runs", scale=3)
                order_by = gr.Dropdown(list(ORDER_COLUMNS), value="run", label="Order by")
                descending = gr.Checkbox(False, label="Descending")
            with gr.Row():
                f1_min = gr.Number(None, label="F1 ≥", minimum=0, maximum=1, elem_id="triage-f1-min")
                f1_max = gr.Number(None, label="F1 ≤", minimum=0, maximum=1, elem_id="triage-f1-max")
                first_exact = gr.Radio([ANY, "yes", "no"], value=ANY, label="First command exact")
                valid_json = gr.Radio([ANY, "yes", "no"], value=ANY, label="Valid JSON", elem_id="triage-valid-json")
                task_complete = gr.Dropdown([ANY, *TASK_COMPLETE_FILTERS], value=ANY, label="task_complete")
            with gr.Row():
                failure_kinds = gr.Dropdown(list(FAILURE_KINDS), multiselect=True, label="Failure kind")
                buckets = gr.CheckboxGroup(BUCKETS, label="Bucket")
                source_groups = gr.Dropdown(choices.source_groups, multiselect=True, label="Source group")
                task_ids = gr.Dropdown(choices.task_ids, multiselect=True, label="Task")
            with gr.Row():
                units_min = gr.Number(None, label="Ref units ≥", precision=0)
                units_max = gr.Number(None, label="Ref units ≤", precision=0)
                text = gr.Textbox(label="Text in commands / raw output", elem_id="triage-text", scale=2)
                text_regex = gr.Checkbox(False, label="Regex (RE2; ^ and $ per command / per line)")
                text_in = gr.Radio(["both", "commands", "raw"], value="both", label="Search in")
            with gr.Row():
                flags = gr.Dropdown(list(BOOLEAN_FLAGS), multiselect=True, label="Flags (all must hold)")
                risks = gr.Dropdown(risk_names, multiselect=True, label="Risk pattern (any)")
                tags = gr.Dropdown(choices.tags, multiselect=True, allow_custom_value=True, label="Tag (any)")
            with gr.Row():  # equiv_f1: the shell-aware second opinion, not the published score
                equiv_min = gr.Number(None, label="equiv F1 ≥ (not the published score)", minimum=0, maximum=1,
                                      elem_id="triage-equiv-min")
                equiv_max = gr.Number(None, label="equiv F1 ≤", minimum=0, maximum=1, elem_id="triage-equiv-max")
                gap_min = gr.Number(None, label="spelling gap ≥ (equiv F1 − F1)", minimum=0, maximum=1,
                                    elem_id="triage-gap-min")
            with gr.Row():  # log-probabilities: runs with `score-reference` of their model, answers with logprobs
                nll_min = gr.Number(None, label="reference NLL/token ≥", minimum=0, elem_id="triage-nll-min")
                nll_max = gr.Number(None, label="reference NLL/token ≤", minimum=0, elem_id="triage-nll-max")
                confidently_wrong = gr.Radio([ANY, "yes", "no"], value=ANY, elem_id="triage-confidently-wrong",
                                             label="Confidently wrong (sure of its answer, F1 0)")
            filters = [run_ids, f1_min, f1_max, first_exact, valid_json, failure_kinds, task_complete, buckets,
                       source_groups, task_ids, units_min, units_max, text, text_regex, text_in, flags, risks, tags,
                       order_by, descending, equiv_min, equiv_max, gap_min, nll_min, nll_max,
                       confidently_wrong]  # fmt: skip
            with gr.Row():
                apply_btn = gr.Button("Apply filters", variant="primary", elem_id="triage-apply")
                slice_name = gr.Textbox(label="Slice name", scale=2)
                save_btn = gr.Button("Save slice")
                saved = gr.Dropdown(choices.slices, label="Saved slices", scale=2)
                open_btn = gr.Button("Open slice")
            share = gr.Textbox(label="Share this slice (URL)", interactive=False, buttons=["copy"], elem_id="triage-share")

        summary = gr.Markdown(elem_id="triage-summary")
        with gr.Row():
            page = gr.Number(1, label="Page", precision=0, minimum=1, scale=0)
            prev_btn = gr.Button("◀ Previous", scale=0)
            next_btn = gr.Button("Next ▶", scale=0)
        table = gr.Dataframe(interactive=False, wrap=False, elem_id="triage-table", max_height=420)
        with gr.Row():
            fig_f1 = gr.Plot(label="F1", elem_id="triage-f1-plot")
            fig_kinds = gr.Plot(label="Failure kinds", elem_id="triage-kinds-plot")

        with gr.Accordion("Selected step: tag, note, open in Compare", open=True):
            selected = gr.State(None)  # (run_id, step_key)
            selected_md = gr.Markdown("Click a row of the table to select a step.", elem_id="triage-selected")
            badges = gr.HTML(elem_id="triage-badges")
            with gr.Row():
                tag = gr.Textbox(label="Tag", elem_id="triage-tag")
                note = gr.Textbox(label="Note", scale=2, elem_id="triage-note")
                author = gr.Textbox(label="Author", elem_id="triage-author")
                tag_btn = gr.Button("Add tag", elem_id="triage-add-tag")
                compare_btn = gr.Button("Open in Compare")

        with gr.Accordion("Export the slice", open=True):
            with gr.Row():
                csv_btn = gr.Button("Export CSV", elem_id="triage-export-csv")
                jsonl_btn = gr.Button("Export JSONL", elem_id="triage-export-jsonl")
                export_file = gr.File(label="Download", interactive=False, elem_id="triage-export-file")

        with gr.Accordion("Baseline vs candidate", open=False):
            with gr.Row():
                baseline = gr.Dropdown(choices.runs, label="Baseline", elem_id="triage-baseline")
                candidate = gr.Dropdown(choices.runs, label="Candidate", elem_id="triage-candidate")
                view = gr.Radio(list(DISAGREEMENT_VIEWS), value="regressed", label="Show")
                diff_btn = gr.Button("Compare runs")
            diff_header = gr.HTML(elem_id="triage-diff-header")  # Δ with its interval: the verdict, not one step
            diff_note = gr.HTML(elem_id="triage-diff-note")
            diff_table = gr.Dataframe(interactive=False, max_height=360, elem_id="triage-diff-table")
            diff_tasks = gr.Dataframe(interactive=False, max_height=300, elem_id="triage-diff-tasks",
                                      label="which tasks carry the difference (score points; the shares add up to Δ)")
            with gr.Row():
                margin = gr.Number(0.0, label="Minimum F1 margin for a pair", minimum=0, maximum=1)
                pairs_btn = gr.Button("Export preference pairs (DPO, within the slice)")
                pairs_file = gr.File(label="Preference pairs", interactive=False)

        with gr.Accordion("Checkpoint flip table and series view", open=False):
            series_panel = build_series_picker(ctx)
            series_pick = series_panel.pick
            with gr.Row():
                series = gr.Dropdown(choices.runs, multiselect=True, label="Runs of one model (ordered by checkpoint)",
                                     scale=3, elem_id="triage-flip-runs")
                threshold = gr.Slider(0, 1, value=DEFAULT_RIGHT_THRESHOLD, step=0.05, label="Right = F1 ≥")
                flip_btn = gr.Button("Show flips")
            flip_counts = gr.Dataframe(interactive=False)
            flip_rows = gr.Dataframe(interactive=False, max_height=360)

        with gr.Accordion("Parse-failure taxonomy", open=False):
            tax_btn = gr.Button("Count failures per run (runs of the slice, or all)")
            tax_table = gr.Dataframe(interactive=False)

        build_stability_panel(ctx, open_in_compare)  # unstable steps, mean F1 vs stability, samples A vs B

        # ---- handlers -----------------------------------------------------------------------
        def show(page_no, *values):
            try:
                spec = spec_from_inputs(*values)
                df, line, page_no = slice_page(ctx, spec, page_no)
                f1, kinds = slice_figures(ctx, spec)
            except LabError as exc:
                gr.Warning(str(exc))
                return gr.update(), gr.update(), f"⚠ {exc}", gr.update(), gr.update(), gr.update(), gr.update()
            return df, df, line, page_no, f1, kinds, None

        view_outputs = [table, page_df, summary, page, fig_f1, fig_kinds, export_file]

        def show_share(base, *values):
            try:
                return share_url(base, spec_from_inputs(*values))
            except LabError:
                return gr.update()

        def apply(*values):
            return show(1, *values)

        apply_btn.click(apply, filters, view_outputs, api_visibility="private").then(
            show_share, [base_url, *filters], share, api_visibility="private")
        prev_btn.click(lambda p, *v: show((p or 1) - 1, *v), [page, *filters], view_outputs, api_visibility="private")
        next_btn.click(lambda p, *v: show((p or 1) + 1, *v), [page, *filters], view_outputs, api_visibility="private")

        def on_load(request: gr.Request):
            """Read the shared-slice link, and the pickers' choices afresh (runs added since start)."""
            base = ""
            spec = SliceSpec()
            try:
                if request is not None:
                    base = page_url(request)
                    spec = SliceSpec.from_query(request.query_params)
            except LabError as exc:
                gr.Warning(f"shared slice link: {exc}")
            values = dict(zip(FILTER_FIELDS, inputs_from_spec(spec)))
            fresh = _fresh_choices()
            out = [gr.update(choices=fresh[name], value=values[name]) if name in fresh else values[name]
                   for name in FILTER_FIELDS]
            return [base, *out, *_picker_updates(fresh)]

        def _fresh_choices() -> dict[str, list]:
            try:
                c = load_choices(ctx)
            except LabError:
                return {}
            return {"run_ids": c.runs, "source_groups": c.source_groups, "task_ids": c.task_ids, "tags": c.tags}

        def _picker_updates(fresh: dict[str, list]) -> list:
            runs = fresh.get("run_ids")
            same = [gr.update() if runs is None else gr.update(choices=runs) for _ in (baseline, candidate, series)]
            return [*same, gr.update(choices=series_choices(ctx)) if runs is not None else gr.update()]

        def on_refresh():
            """The tab opened again: every run picker lists the runs in the store now."""
            fresh = _fresh_choices()
            return [gr.update() if name not in fresh else gr.update(choices=fresh[name]) for name in
                    ("run_ids", "source_groups", "task_ids", "tags")] + _picker_updates(fresh)

        triage_tab.select(on_refresh, None, [run_ids, source_groups, task_ids, tags, baseline, candidate, series, series_pick],
                          api_visibility="private", show_progress="hidden")

        gr.on(triggers=None, fn=on_load, inputs=None, outputs=[base_url, *filters, baseline, candidate, series, series_pick],
              api_visibility="private").then(
            apply, filters, view_outputs, api_visibility="private").then(
            show_share, [base_url, *filters], share, api_visibility="private")  # fmt: skip

        def on_save(name, author_name, *values):
            try:
                save_slice(ctx.store, name, spec_from_inputs(*values), author=author_name or "")
            except LabError as exc:
                gr.Warning(str(exc))
                return gr.update()
            gr.Info(f"slice '{name.strip()}' saved")
            return gr.update(choices=list_slices(ctx.store), value=name.strip())

        save_btn.click(on_save, [slice_name, author, *filters], saved, api_visibility="private")

        def on_open(name):
            try:
                spec = load_slice(ctx.store, name)
            except LabError as exc:
                gr.Warning(str(exc))
                return [gr.update() for _ in filters]
            return inputs_from_spec(spec)

        open_btn.click(on_open, saved, filters, api_visibility="private").then(
            apply, filters, view_outputs, api_visibility="private").then(
            show_share, [base_url, *filters], share, api_visibility="private")  # fmt: skip

        def badges_of(sel):
            return annotation_badges_html(annotations_for(ctx.store, *sel)) if sel else ""

        def on_select(df: pd.DataFrame, evt: gr.SelectData):
            row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
            if df is None or len(df) <= row:
                return None, "Click a row of the table to select a step.", ""
            rec = df.iloc[row]
            sel = (str(rec["run_id"]), str(rec["step_key"]))
            md = f"**{rec.get('run', sel[0])}** · step `{sel[1]}` · F1 {rec['command_f1']}"
            return sel, md, badges_of(sel)

        table.select(on_select, page_df, [selected, selected_md, badges], api_visibility="private")

        def on_tag(sel, tag_text, note_text, author_name):
            if not sel:
                gr.Warning("select a step in the table first")
                return gr.update(), gr.update(), gr.update()
            try:
                add_annotation(ctx.store, sel[0], sel[1], tag_text, note_text or "", author_name or "")
            except LabError as exc:
                gr.Warning(str(exc))
                return gr.update(), gr.update(), gr.update()
            return badges_of(sel), "", gr.update(choices=tags_in_use(ctx.store))

        tag_btn.click(on_tag, [selected, tag, note, author], [badges, tag, tags], api_visibility="private")

        def on_compare(sel, request: gr.Request):
            if not sel:
                gr.Warning("select a step in the table first")
                return tuple(gr.update() for _ in open_in_compare.outputs)
            return open_in_compare([sel[0]], sel[1], request)

        compare_btn.click(on_compare, selected, open_in_compare.outputs, api_visibility="private")

        def on_export(fmt):
            def run(*values):
                try:
                    spec = spec_from_inputs(*values)
                    return str(export_slice(ctx.store, spec, _export_dir() / f"triage-slice.{fmt}", fmt))
                except LabError as exc:
                    gr.Warning(str(exc))
                    return None
            return run

        csv_btn.click(on_export("csv"), filters, export_file, api_visibility="private")
        jsonl_btn.click(on_export("jsonl"), filters, export_file, api_visibility="private")

        def on_diff(base, cand, which):
            if not base or not cand:
                gr.Warning("pick a baseline and a candidate run")
                return gr.update(), gr.update(), gr.update(), gr.update()
            try:
                df = disagreement(ctx.store, base, cand, which)
                header, tasks = paired_view(ctx, base, cand)
            except LabError as exc:
                gr.Warning(str(exc))
                return gr.update(), gr.update(), gr.update(), gr.update()
            return df, diff_message(len(df), which), header, tasks

        diff_btn.click(on_diff, [baseline, candidate, view], [diff_table, diff_note, diff_header, diff_tasks],
                       api_visibility="private")

        def open_row(run_for_row):
            def handler(df: pd.DataFrame, *args, request: gr.Request | None = None):
                evt = args[-1]
                row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
                if df is None or len(df) <= row:
                    return tuple(gr.update() for _ in open_in_compare.outputs)
                return open_in_compare(run_for_row(df.iloc[row], *args[:-1]), str(df.iloc[row]["step_key"]), request)
            return handler

        def diff_select(df, base, cand, evt: gr.SelectData, request: gr.Request):
            return open_row(lambda rec, b, c: [r for r in (b, c) if r])(df, base, cand, evt, request=request)

        diff_table.select(diff_select, [diff_table, baseline, candidate], open_in_compare.outputs,
                          api_visibility="private")

        def on_pairs(base, cand, min_margin, *values):
            if not base or not cand:
                gr.Warning("pick a baseline and a candidate run")
                return None
            try:
                spec = spec_from_inputs(*values)
                spec.run_ids = []  # the pair's two runs replace the slice's runs
                messages = {s.key: s.messages for s in ctx.replay.steps} if ctx.replay else None
                path = _export_dir() / "preference-pairs.jsonl"
                return str(export_preference_pairs(ctx.store, base, cand, path, spec=spec,
                                                   min_margin=float(min_margin or 0), messages_by_key=messages))
            except LabError as exc:
                gr.Warning(str(exc))
                return None

        pairs_btn.click(on_pairs, [baseline, candidate, margin, *filters], pairs_file, api_visibility="private")

        def on_flips(ids, thr):
            try:
                flips = flip_table(ctx.store, list(ids or []), float(thr))
            except LabError as exc:
                gr.Warning(str(exc))
                return gr.update(), gr.update()
            return flip_summary(flips), flips.drop(columns=["pair"])

        flip_btn.click(on_flips, [series, threshold], [flip_counts, flip_rows], api_visibility="private")
        wire_series_picker(ctx, series_panel, series, triage_tab)

        def flip_select(df, evt: gr.SelectData, request: gr.Request):
            return open_row(lambda rec: [rec["from_run_id"], rec["to_run_id"]])(df, evt, request=request)

        flip_rows.select(flip_select, flip_rows, open_in_compare.outputs, api_visibility="private")

        def on_taxonomy(ids):
            return run_taxonomy(ctx.store, list(ids or []) or None)

        tax_btn.click(on_taxonomy, run_ids, tax_table, api_visibility="private")
