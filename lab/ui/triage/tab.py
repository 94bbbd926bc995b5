"""The Triage tab: slice steps, compare a baseline with a candidate, flips, taxonomy, tags, exports.
This module lays the tab out and wires its events to the handlers of lab.ui.triage.handlers."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr
import pandas as pd

from lab.errors import LabError
from lab.triage import BOOLEAN_FLAGS, FAILURE_KINDS, load_risk_patterns
from lab.triage.compare_runs import DEFAULT_RIGHT_THRESHOLD, DISAGREEMENT_VIEWS
from lab.triage.slices import ORDER_COLUMNS, TASK_COMPLETE_FILTERS
from lab.ui.shell.links import follow_in_address_bar
from lab.ui.shell.wiring import bind
from lab.ui.triage import handlers as h
from lab.ui.triage.link import compare_linked_pair, link_names_pair, picked_by_hand, triage_link
from lab.ui.triage.filters import ANY, Choices, load_choices
from lab.ui.triage.series_picker import SeriesPanel, build_series_picker, wire_series_picker
from lab.ui.triage.stability import build_stability_panel
from lab.workspace import LabContext

BUCKETS = ["early", "mid", "late"]
PRIVATE = {"api_visibility": "private"}


@dataclass
class FilterPanel:
    """The filter widgets (`inputs`, in lab.ui.triage.filters.FILTER_FIELDS order) and the slice's buttons."""

    inputs: list
    pickers: list  # the filters whose choices come from the store (handlers.PICKERS)
    run_ids: gr.Dropdown
    tags: gr.Dropdown
    apply: gr.Button
    slice_name: gr.Textbox
    save: gr.Button
    saved: gr.Dropdown
    open: gr.Button
    share: gr.Textbox


@dataclass
class SliceView:
    """The slice's page: its table and figures, the selected step, the export."""

    outputs: list  # what showing a page fills: table, its frame, summary, page, the figures, the export file
    page: gr.Number
    previous: gr.Button
    next: gr.Button
    table: gr.Dataframe
    page_df: gr.State
    selected: gr.State
    selected_md: gr.Markdown
    badges: gr.HTML
    tag: gr.Textbox
    note: gr.Textbox
    author: gr.Textbox
    add_tag: gr.Button
    compare: gr.Button
    csv: gr.Button
    jsonl: gr.Button
    export_file: gr.HTML


@dataclass
class PairPanel:
    """Baseline vs candidate, with preference pairs."""

    accordion: gr.Accordion
    baseline: gr.Dropdown
    candidate: gr.Dropdown
    view: gr.Radio
    compare: gr.Button
    header: gr.HTML
    note: gr.HTML
    table: gr.Dataframe
    tasks: gr.Dataframe
    margin: gr.Number
    pairs: gr.Button
    pairs_file: gr.HTML


@dataclass
class FlipPanel:
    """The checkpoint flip table and the series view."""

    series_panel: SeriesPanel
    series: gr.Dropdown
    threshold: gr.Slider
    show: gr.Button
    counts: gr.Dataframe
    rows: gr.Dataframe


def filter_panel(choices: Choices) -> FilterPanel:
    """The filters accordion."""
    risk_names = [f"{p.category}:{p.name}" for p in load_risk_patterns().patterns]
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
        equiv_min, equiv_max, gap_min, nll_min, nll_max, confidently_wrong = _score_filters()
        inputs = [run_ids, f1_min, f1_max, first_exact, valid_json, failure_kinds, task_complete, buckets,
                  source_groups, task_ids, units_min, units_max, text, text_regex, text_in, flags, risks, tags,
                  order_by, descending, equiv_min, equiv_max, gap_min, nll_min, nll_max,
                  confidently_wrong]  # fmt: skip
        with gr.Row():
            apply_btn = gr.Button("Apply filters", variant="primary", elem_id="triage-apply")
            slice_name = gr.Textbox(label="Slice name", scale=2, elem_id="triage-slice-name")
            save_btn = gr.Button("Save slice", elem_id="triage-save-slice")
            saved = gr.Dropdown(choices.slices, label="Saved slices", scale=2)
            open_btn = gr.Button("Open slice")
        share = gr.Textbox(label="Link to this view (the slice and the pair compared)", interactive=False,
                           buttons=["copy"], elem_id="triage-share")
    return FilterPanel(inputs, [run_ids, source_groups, task_ids, tags], run_ids, tags, apply_btn, slice_name,
                       save_btn, saved, open_btn, share)


def _score_filters() -> tuple:
    """The equiv_f1 and log-probability filters (two rows)."""
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
    return equiv_min, equiv_max, gap_min, nll_min, nll_max, confidently_wrong


def slice_view() -> SliceView:
    """The slice's summary, page, table and figures; the selected step's panel; the export."""
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
        selected_md = gr.Markdown(h.NO_STEP, elem_id="triage-selected")
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
            export_file = gr.HTML(elem_id="triage-export-file")  # a download link (lab.ui.shell.exports)
    page_df = gr.State(pd.DataFrame())
    outputs = [table, page_df, summary, page, fig_f1, fig_kinds, export_file]
    return SliceView(outputs, page, prev_btn, next_btn, table, page_df, selected, selected_md, badges, tag, note,
                     author, tag_btn, compare_btn, csv_btn, jsonl_btn, export_file)


def pair_panel(choices: Choices) -> PairPanel:
    """The baseline-vs-candidate accordion."""
    with gr.Accordion("Baseline vs candidate", open=False, elem_id="triage-pair-panel") as accordion:
        with gr.Row():
            # a typed name reaches the handler, which finds the run or says it is not found
            baseline = gr.Dropdown(choices.runs, label="Baseline", elem_id="triage-baseline", allow_custom_value=True)
            candidate = gr.Dropdown(choices.runs, value=choices.runs[1][1] if len(choices.runs) > 1 else None,
                                    label="Candidate", elem_id="triage-candidate", allow_custom_value=True)
            view = gr.Radio(list(DISAGREEMENT_VIEWS), value="regressed", label="Show")
            diff_btn = gr.Button("Compare runs", elem_id="triage-pair-compare")
        diff_header = gr.HTML(elem_id="triage-diff-header")  # Δ with its interval: the verdict, not one step
        diff_note = gr.HTML(elem_id="triage-diff-note")
        diff_table = gr.Dataframe(interactive=False, max_height=360, elem_id="triage-diff-table")
        diff_tasks = gr.Dataframe(interactive=False, max_height=300, elem_id="triage-diff-tasks",
                                  label="which tasks carry the difference (score points; the shares add up to Δ)")
        with gr.Row():
            margin = gr.Number(0.0, label="Minimum F1 margin for a pair", minimum=0, maximum=1)
            pairs_btn = gr.Button("Export preference pairs (DPO, within the slice)")
            pairs_file = gr.HTML(elem_id="triage-pairs-file")  # a download link (lab.ui.shell.exports)
    return PairPanel(accordion, baseline, candidate, view, diff_btn, diff_header, diff_note, diff_table, diff_tasks, margin,
                     pairs_btn, pairs_file)


def flip_panel(ctx: LabContext, choices: Choices) -> FlipPanel:
    """The checkpoint flip table and series view accordion."""
    with gr.Accordion("Checkpoint flip table and series view", open=False):
        series_panel = build_series_picker(ctx)
        with gr.Row():
            series = gr.Dropdown(choices.runs, multiselect=True, label="Runs of one model (ordered by checkpoint)",
                                 scale=3, elem_id="triage-flip-runs")
            threshold = gr.Slider(0, 1, value=DEFAULT_RIGHT_THRESHOLD, step=0.05, label="Right = F1 ≥")
            flip_btn = gr.Button("Show flips")
        flip_counts = gr.Dataframe(interactive=False)
        flip_rows = gr.Dataframe(interactive=False, max_height=360)
    return FlipPanel(series_panel, series, threshold, flip_btn, flip_counts, flip_rows)


def taxonomy_panel(ctx: LabContext, run_ids: gr.Dropdown) -> None:
    """The parse-failure taxonomy accordion, wired."""
    with gr.Accordion("Parse-failure taxonomy", open=False):
        tax_btn = gr.Button("Count failures per run (runs of the slice, or all)")
        tax_table = gr.Dataframe(interactive=False)
    tax_btn.click(bind(h.count_failures, ctx), run_ids, tax_table, **PRIVATE)


def build_triage_tab(ctx: LabContext, open_in_compare) -> None:
    """Mount the Triage tab. `open_in_compare(run_ids, step_key)` switches to Compare at a step."""
    try:
        choices = load_choices(ctx)
        problem = None if ctx.store is not None else (ctx.store_error or "the results database is not open")
    except LabError as exc:
        choices, problem = Choices([], [], [], [], []), str(exc)
    with gr.Tab("Triage", id="triage") as tab:
        if problem:
            gr.Markdown(f"**Triage needs the results database:** {problem}")
            return
        base_url = gr.State("")
        filters = filter_panel(choices)
        view = slice_view()
        pair = pair_panel(choices)
        flips = flip_panel(ctx, choices)
        taxonomy_panel(ctx, filters.run_ids)
        build_stability_panel(ctx, open_in_compare)  # unstable steps, mean F1 vs stability, samples A vs B
        wire_slice(ctx, tab, base_url, filters, view, pair, [pair.baseline, pair.candidate, flips.series,
                                                             flips.series_panel.pick])
        wire_step(ctx, open_in_compare, filters, view)
        wire_pair(ctx, open_in_compare, filters, pair)
        wire_flips(ctx, open_in_compare, tab, flips)


def wire_slice(ctx: LabContext, tab: gr.Tab, base_url: gr.State, filters: FilterPanel, view: SliceView,
               pair: PairPanel, run_pickers: list) -> None:
    """Filters, pages, the shared link (the slice and the pair), saved slices, and the pickers' choices when the
    page or tab opens; a link's pair is compared once the page has read it."""
    inputs, outputs = filters.inputs, view.outputs
    apply = bind(h.apply_filters, ctx)
    picked = gr.State(False)  # the pair is the user's (picked, or a link's), not the pickers' first choices
    share, shared = bind(triage_link, ctx), [base_url, picked, pair.baseline, pair.candidate, *inputs]
    filters.apply.click(apply, inputs, outputs, **PRIVATE).then(share, shared, filters.share, **PRIVATE)
    for picker in (pair.baseline, pair.candidate):
        picker.input(picked_by_hand, None, picked, **PRIVATE).then(share, shared, filters.share, **PRIVATE)
    follow_in_address_bar(filters.share, tab, "triage-share")
    view.previous.click(bind(h.turn_page, ctx, -1), [view.page, *inputs], outputs, **PRIVATE)
    view.next.click(bind(h.turn_page, ctx, 1), [view.page, *inputs], outputs, **PRIVATE)
    tab.select(bind(h.refresh_pickers, ctx), None, [*filters.pickers, *run_pickers], show_progress="hidden",
               **PRIVATE)
    gr.on(triggers=None, fn=bind(h.load_page, ctx), inputs=None,
          outputs=[base_url, *inputs, *run_pickers, pair.note, pair.accordion], **PRIVATE).then(
        link_names_pair, None, picked, **PRIVATE).then(
        apply, inputs, outputs, **PRIVATE).then(share, shared, filters.share, **PRIVATE).then(
        bind(compare_linked_pair, h.compare_pair, ctx), [pair.baseline, pair.candidate, pair.view],
        [pair.table, pair.note, pair.header, pair.tasks], **PRIVATE)
    filters.save.click(bind(h.save_current_slice, ctx), [filters.slice_name, view.author, *inputs], filters.saved,
                       **PRIVATE)
    filters.open.click(bind(h.open_saved_slice, ctx), filters.saved, inputs, **PRIVATE).then(
        apply, inputs, outputs, **PRIVATE).then(share, shared, filters.share, **PRIVATE)


def wire_step(ctx: LabContext, open_in_compare, filters: FilterPanel, view: SliceView) -> None:
    """The selected step: select, tag, open in Compare; and the slice's export."""
    view.table.select(bind(h.select_step, ctx), view.page_df, [view.selected, view.selected_md, view.badges],
                      **PRIVATE)
    view.add_tag.click(bind(h.tag_step, ctx), [view.selected, view.tag, view.note, view.author],
                       [view.badges, view.tag, filters.tags], **PRIVATE)
    view.compare.click(bind(h.open_step, open_in_compare), view.selected, open_in_compare.outputs, **PRIVATE)
    view.csv.click(bind(h.export_filtered, ctx, "csv"), filters.inputs, view.export_file, **PRIVATE)
    view.jsonl.click(bind(h.export_filtered, ctx, "jsonl"), filters.inputs, view.export_file, **PRIVATE)


def wire_pair(ctx: LabContext, open_in_compare, filters: FilterPanel, pair: PairPanel) -> None:
    """Baseline vs candidate: the comparison, a click on one of its steps, preference pairs."""
    pair.compare.click(bind(h.compare_pair, ctx), [pair.baseline, pair.candidate, pair.view],
                       [pair.table, pair.note, pair.header, pair.tasks], **PRIVATE)
    pair.table.select(bind(h.open_pair_row, open_in_compare), [pair.table, pair.baseline, pair.candidate],
                      open_in_compare.outputs, **PRIVATE)
    pair.pairs.click(bind(h.export_pairs, ctx), [pair.baseline, pair.candidate, pair.margin, *filters.inputs],
                     pair.pairs_file, **PRIVATE)


def wire_flips(ctx: LabContext, open_in_compare, tab: gr.Tab, flips: FlipPanel) -> None:
    """The flip table, a click on one of its steps, and the series view."""
    flips.show.click(bind(h.show_flips, ctx), [flips.series, flips.threshold], [flips.counts, flips.rows], **PRIVATE)
    wire_series_picker(ctx, flips.series_panel, flips.series, tab)
    flips.rows.select(bind(h.open_flip_row, open_in_compare), flips.rows, open_in_compare.outputs, **PRIVATE)
