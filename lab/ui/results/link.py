"""Results' link: `?tab=results&baseline=RUN&series=NAME` opens Results with that baseline picked (every row's
Δ score against it) and that checkpoint series drawn against its first point with its intervals; the view on
screen names its link, and picking a baseline or a series moves the address bar."""
from __future__ import annotations

from typing import Any, Callable

import gradio as gr

from lab.errors import LabError
from lab.ui.shell.links import (
    Link, base_of, follow_in_address_bar, link_box, link_url, notice_html, request_link, shown,
)
from lab.ui.shell.run_refs import run_of, run_ref
from lab.ui.shell.wiring import bind
from lab.workspace import LabContext

LINK_ID = "lab-results-link"
NOTE_ID = "lab-results-link-note"
SERIES_PLOT = "checkpoint_series"  # the plot whose one series is drawn with its intervals


def series_names(ctx: LabContext) -> list[str]:
    """The store's checkpoint series (of two runs or more)."""
    from lab.store.series import series_frame

    if ctx.store is None:
        return []
    with ctx.store_session() as store:
        return sorted(set(series_frame(store)["series"]))


def results_link(ctx: LabContext, baseline: Any, series: Any, request: gr.Request) -> str:
    """The link of Results as it is on screen: its baseline (by run_ref) and its series."""
    values = {"baseline": run_ref(ctx, baseline) if isinstance(baseline, str) and baseline else "",
              "series": series if isinstance(series, str) else ""}
    return link_url(base_of(request), "results", values)


def _baseline(ctx: LabContext, ref: str, options: Callable[[LabContext], list]) -> tuple[str | None, list[str]]:
    try:
        run_id = run_of(ctx, ref)
    except LabError:
        run_id = None
    if run_id is None or run_id not in {value for _, value in options(ctx)}:
        return None, [f"'{shown(ref)}' is no run with per-step answers here; Results opened without a baseline"]
    return run_id, []


def open_link(ctx: LabContext, link: Link, options: Callable[[LabContext], list]) -> tuple[str | None, str | None,
                                                                                            list[str]]:
    """The baseline run id (one of `options(ctx)`: the baseline picker's) and the series a link names (None:
    none, or one it cannot open), with the lines about what it could not open."""
    if not link.for_tab("results"):
        return None, None, []
    baseline, notes = _baseline(ctx, link.get("baseline"), options) if link.get("baseline") else (None, [])
    series = link.get("series") or None
    if series and series not in series_names(ctx):
        notes.append(f"no checkpoint series '{shown(series)}' in the store; Results opened without one")
        series = None
    return baseline, series, notes


def load_results(ctx: LabContext, options: Callable[[LabContext], list], request: gr.Request) -> tuple:
    """Page load: the baseline and series the link names (their pickers' choices afresh), and the line."""
    baseline, series, notes = open_link(ctx, request_link(request), options)
    return (gr.update(value=baseline) if baseline else gr.update(),
            gr.update(choices=series_names(ctx), value=series), notice_html(notes))


def series_figure(ctx: LabContext, draw: Callable[..., Any], series: Any, which: Any, scope: Any, text: Any) -> Any:
    """The series picked, against its first point with its intervals; without one, `draw(ctx, which, scope, text)`
    (the plot picked)."""
    if not isinstance(series, str) or not series:
        return draw(ctx, which, scope, text)
    from lab.figures.series import series_stats_figure
    from lab.analysis.series_judgement import series_stats

    try:  # computed outside the store's lock, kept for everybody (lab.analysis.cache)
        return series_stats_figure(series_stats(ctx.store, series, hold=ctx.store_session, admit=ctx.stats_admission))
    except LabError as exc:
        gr.Warning(str(exc))
        return None


def build_series_pick(ctx: LabContext) -> gr.Dropdown:
    """Inside the plot row: a checkpoint series to draw with its intervals."""
    return gr.Dropdown(series_names(ctx), value=None, label="checkpoint series (against its first point, 95 %)",
                       scale=2, elem_id="lab-results-series", allow_custom_value=False)


def build_link_parts() -> tuple[gr.Textbox, gr.HTML]:
    """Inside Results' layout: the "copy link" box and the line about a link's names."""
    return link_box(LINK_ID), gr.HTML(elem_id=NOTE_ID)


def wire_results_link(ctx: LabContext, tab: gr.Tab, baseline: gr.Dropdown, series: gr.Dropdown, which: Any,
                      box: gr.Textbox, note: gr.HTML, options: Callable[[LabContext], list]) -> None:
    """The page's link read on load; the link box follows the baseline and the series; a plot picked by hand
    leaves the series (the plot's own events draw either: lab.ui.results.tab)."""
    quiet = {"api_visibility": "private", "show_progress": "hidden"}
    gr.on(triggers=None, fn=bind(load_results, ctx, options), inputs=None, outputs=[baseline, series, note], **quiet)
    make = bind(results_link, ctx)
    for picker in (baseline, series):
        picker.change(make, [baseline, series], box, **quiet)
    tab.select(make, [baseline, series], box, **quiet)
    tab.select(bind(series_choices, ctx), None, series, **quiet)
    if which is not None:
        which.input(lambda: None, None, series, **quiet)
    follow_in_address_bar(box, tab, LINK_ID)


def series_choices(ctx: LabContext) -> Any:
    """The series picker with the store's series now."""
    return gr.update(choices=series_names(ctx))
