"""Triage: pick a checkpoint series (recognised from names) for the flip table, and plot it."""
from __future__ import annotations

import gradio as gr

from lab.ui.shell.context import LabContext


def _series(ctx: LabContext) -> dict[str, list[str]]:
    from lab.store.series import series_runs

    if ctx.store is None:
        return {}
    with ctx._store_lock:
        return series_runs(ctx.store)


def series_choices(ctx: LabContext) -> list[tuple[str, str]]:
    """(label, series) of every checkpoint series in the store now."""
    return [(f"{name} · {len(ids)} runs", name) for name, ids in _series(ctx).items()]


def build_series_picker(ctx: LabContext) -> tuple[gr.Dropdown, gr.Plot]:
    pick = gr.Dropdown(series_choices(ctx), value=None, label="checkpoint series (from the run names)", elem_id="lab-series-pick")
    plot = gr.Plot(label="score against checkpoint", elem_id="lab-series-plot")
    return pick, plot


def wire_series_picker(ctx: LabContext, pick: gr.Dropdown, runs: gr.Dropdown, plot: gr.Plot) -> None:
    """Picking a series fills the flip table's runs (in checkpoint order) and draws that series."""
    from lab.store.series import series_figure, series_frame

    def on_pick(name: str | None):
        if not name:
            return gr.update(), None
        with ctx._store_lock:
            df = series_frame(ctx.store)
            every = ctx.store.query("SELECT run_id, display_name FROM runs ORDER BY display_name, run_id")
        part = df[df["series"] == name]
        choices = [(f"{r.display_name} · {r.run_id}", r.run_id) for r in every.itertuples()]
        return (gr.update(choices=choices, value=list(part["run_id"])),
                series_figure(part, f"{name}: score against {part['x_kind'].iloc[0] if len(part) else 'checkpoint'}"))

    pick.change(on_pick, pick, [runs, plot], api_visibility="private")
