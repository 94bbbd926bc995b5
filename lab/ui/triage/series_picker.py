"""Triage: pick a checkpoint series for the flip table and see it point by point against its first point
(score and reference NLL over all steps, each bucket and a saved slice, with intervals; lab.analysis.series_judgement),
and place any run in a series at a given position (the base model at 0)."""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from lab.errors import LabError
from lab.workspace import LabContext
from lab.ui.shell.html_text import esc
from lab.ui.shell.wiring import statistics_events

NO_SLICE = "(no slice)"


def _series(ctx: LabContext) -> dict[str, list[str]]:
    from lab.store.series import series_runs

    if ctx.store is None:
        return {}
    with ctx.store_session() as store:
        return series_runs(store)


def series_choices(ctx: LabContext) -> list[tuple[str, str]]:
    """(label, series) of every checkpoint series in the store now."""
    return [(f"{name} · {len(ids)} runs", name) for name, ids in _series(ctx).items()]


def slice_choices(ctx: LabContext) -> list[str]:
    from lab.triage import list_slices

    if ctx.store is None:
        return [NO_SLICE]
    with ctx.store_session() as store:
        return [NO_SLICE, *list_slices(store)]


def run_choices(ctx: LabContext) -> list[tuple[str, str]]:
    if ctx.store is None:
        return []
    with ctx.store_session() as store:
        df = store.query("SELECT run_id, display_name FROM runs ORDER BY display_name, run_id")
    return [(f"{r.display_name} · {r.run_id}", r.run_id) for r in df.itertuples()]


@dataclass
class SeriesPanel:
    pick: gr.Dropdown
    slice: gr.Dropdown
    plot: gr.Plot
    note: gr.HTML
    table: gr.Dataframe
    run: gr.Dropdown
    name: gr.Textbox
    position: gr.Number
    kind: gr.Radio
    place: gr.Button
    leave: gr.Button


def build_series_picker(ctx: LabContext) -> SeriesPanel:
    from lab.store.series_members import X_KINDS

    with gr.Row():
        pick = gr.Dropdown(series_choices(ctx), value=None, label="checkpoint series", elem_id="lab-series-pick", scale=3)
        slice_pick = gr.Dropdown(slice_choices(ctx), value=NO_SLICE, elem_id="lab-series-slice", scale=2,
                                 label="follow a saved slice too (e.g. the steps trained on)")
    plot = gr.Plot(label="score, reference NLL and Δ score against the first checkpoint", elem_id="lab-series-plot")
    note = gr.HTML(elem_id="lab-series-note")
    table = gr.Dataframe(interactive=False, wrap=False, max_height=420, elem_id="lab-series-table",
                         label="per checkpoint and part of the steps, against the series' first point")
    with gr.Row(equal_height=True):
        run = gr.Dropdown(run_choices(ctx), value=None, label="place a run in a series (the base model too)",
                          elem_id="lab-series-run", scale=3)
        name = gr.Textbox(label="series", elem_id="lab-series-name", scale=2)
        position = gr.Number(0, label="at position", precision=0, minimum=0, elem_id="lab-series-at", scale=1)
        kind = gr.Radio(list(X_KINDS), value=X_KINDS[0], label="position is a", scale=1)
        place = gr.Button("Place", elem_id="lab-series-place", scale=0, min_width=90)
        leave = gr.Button("Take out", elem_id="lab-series-leave", scale=0, min_width=90)
    return SeriesPanel(pick, slice_pick, plot, note, table, run, name, position, kind, place, leave)


def series_view(ctx: LabContext, name: str, slice_name: str | None):
    """(run ids in order, figure, note HTML, table) of series `name` (LabError for a bad series or slice)."""
    from lab.figures.series import series_stats_figure
    from lab.analysis.series_judgement import adjustment_note, series_stats, series_table
    from lab.analysis.cache import shared
    from lab.triage.series_slices import slice_step_keys

    with ctx.store_session() as store:
        keys = slice_step_keys(store, slice_name) if slice_name and slice_name != NO_SLICE else None
    stats = series_stats(ctx.store, name, keys, slice_name or "", hold=ctx.store_session, admit=ctx.stats_admission)

    def render():  # drawn once for everybody until the store changes (plotly is slow to build)
        notes = "".join(f'<div class="lab-muted">{esc(n)}</div>' for n in [adjustment_note(stats), *stats.notes])
        return series_stats_figure(stats), notes, series_table(stats)
    figure, notes, table = shared(ctx.store, ("series view", name, slice_name or "", None if keys is None else tuple(keys)),
                                  render)
    return list(stats.points["run_id"]), figure, notes, table


def wire_series_picker(ctx: LabContext, panel: SeriesPanel, runs: gr.Dropdown, tab: gr.Tab) -> None:
    """Picking a series fills the flip table's runs (in checkpoint order) and draws that series; placing a
    run refreshes both. Opening the tab (or the page) lists the slices and runs saved since."""
    from lab.store.series import known_series
    from lab.store.series_members import join_series, leave_series, series_name

    def fresh():
        return gr.update(choices=slice_choices(ctx)), gr.update(choices=run_choices(ctx))

    tab.select(fresh, None, [panel.slice, panel.run], api_visibility="private", show_progress="hidden")
    gr.on(triggers=None, fn=fresh, outputs=[panel.slice, panel.run], api_visibility="private", show_progress="hidden")

    def on_pick(name: str | None, slice_name: str | None):
        if not name:
            return gr.update(), None, "", None, gr.update()
        try:
            ids, figure, notes, table = series_view(ctx, name, slice_name)
        except LabError as exc:
            gr.Warning(str(exc))
            return gr.update(), gr.update(), f'<div class="lab-empty">{esc(exc)}</div>', gr.update(), gr.update()
        return (gr.update(choices=run_choices(ctx), value=ids), figure, notes, table, gr.update(value=name))

    outputs = [runs, panel.plot, panel.note, panel.table, panel.name]
    # .input: a user's pick; a value set by Place / Take out is drawn by that handler itself
    panel.pick.input(on_pick, [panel.pick, panel.slice], outputs, api_visibility="private", **statistics_events())
    panel.slice.input(on_pick, [panel.pick, panel.slice], outputs, api_visibility="private", **statistics_events())

    def on_place(run_id: str | None, name: str, position, kind: str, slice_name: str | None):
        if not run_id:
            gr.Warning("pick the run to place")
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
        try:
            with ctx.store_session() as store:
                new = series_name(name) not in known_series(store)
                series, x, x_kind = join_series(store, run_id, name, position, kind)
        except LabError as exc:
            gr.Warning(str(exc))
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
        choices = series_choices(ctx)
        shown = series in {c[1] for c in choices}
        gr.Info(f"started a new series {series} at {x_kind} {x}" + ("" if shown else " (the picker lists it once a "
                "second run joins)") if new else f"placed in {series} at {x_kind} {x}")
        return (gr.update(choices=choices, value=series if shown else None),
                *(on_pick(series, slice_name) if shown else (gr.update(), None, "", None, gr.update(value=series))))

    def on_leave(run_id: str | None, name: str, slice_name: str | None):
        if not run_id:
            gr.Warning("pick the run to take out of its series")
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
        try:
            with ctx.store_session() as store:
                taken = leave_series(store, run_id)
        except LabError as exc:
            gr.Warning(str(exc))
            return gr.update(), gr.update(), gr.update(), gr.update(), gr.update(), gr.update()
        if not taken:
            gr.Info("that run was not placed in a series by hand (its name or the catalogue give its series)")
        choices = series_choices(ctx)
        still = name if name in {c[1] for c in choices} else None
        return (gr.update(choices=choices, value=still), *(on_pick(still, slice_name) if still else
                                                            (gr.update(), None, "", None, gr.update())))

    panel.place.click(on_place, [panel.run, panel.name, panel.position, panel.kind, panel.slice],
                      [panel.pick, *outputs], api_visibility="private")
    panel.leave.click(on_leave, [panel.run, panel.name, panel.slice], [panel.pick, *outputs],
                      api_visibility="private")
