"""Compare's link: `?tab=compare&step=TASK/STEP&engines=A,B` opens Compare at that step with those columns (a
stored run named is added as a column, as "open in Compare" adds one); the view on screen names its link.

A name that is no column this page may show and no stored run it may open (a column of another visitor, a run
whose file lies outside the data folders on a public deployment, a typo) is said in one line, the same line
whichever it is, and the view opens without it."""
from __future__ import annotations

from typing import Any

import gradio as gr

from lab.errors import LabError
from lab.ui.compare.link_row import LINK_ID
from lab.ui.compare.handlers import CompareTab, step_outputs
from lab.ui.shell.links import (
    Link, base_of, follow_in_address_bar, link_url, listed, notice_html, request_link, shown,
)
from lab.ui.shell.run_refs import run_of, run_ref
from lab.workspace import LabContext


def column_refs(ctx: LabContext) -> list[str]:
    """The columns on screen as a link names them: a stored run by run_ref, any other engine by its name."""
    refs = []
    for entry in ctx.engine_entries():
        run_id = ctx.stored_run_id(entry.stored_path) if entry.stored_path is not None else None
        ref = run_ref(ctx, run_id) if run_id else entry.name
        if "," not in ref:
            refs.append(ref)
    return refs


def compare_link(ctx: LabContext, key: Any, request: gr.Request) -> str:
    """The link of Compare as it is on screen: the step and the columns."""
    step = key if isinstance(key, str) and ctx.replay is not None and key in ctx.replay.by_key else ""
    return link_url(base_of(request), "compare", {"step": step, "engines": ",".join(column_refs(ctx))})


def _not_here(name: str) -> str:
    return f"'{shown(name)}' is no engine column or stored run this lab shows you; Compare opened without it"


def open_columns(ctx: LabContext, names: list[str]) -> list[str]:
    """Add the named stored runs that are not columns yet; the lines about names it could not open."""
    notes: list[str] = []
    visible = {e.name for e in ctx.engine_entries()}
    for name in names:
        if name in visible:
            continue
        try:
            visible.add(ctx.add_stored_run(run_of(ctx, name)))
        except LabError as exc:  # no such run, or one a visitor may not open (its file outside the data folders)
            notes.append(_not_here(name) if ctx.settings.public or "names no run" in str(exc) else
                         f"'{shown(name)}': {exc}")
    return notes


def open_link(ctx: LabContext, link: Link) -> tuple[str | None, list[str]]:
    """The step a link opens Compare at (None: the first) after adding its columns, and what it could not open."""
    if not (link.for_tab("compare") or (link.tab is None and (link.get("step") or link.get("engines")))):
        return None, []
    names, notes = listed(link.get("engines"))
    notes += open_columns(ctx, names)
    step = link.get("step")
    if step and (ctx.replay is None or step not in ctx.replay.by_key):
        notes.append(f"no step '{shown(step)}' in the replay; Compare opened at its first step")
        step = ""
    return step or None, notes


def load_compare(ctx: LabContext, view: CompareTab, request: gr.Request) -> tuple:
    """Page load: Compare at the step (and with the columns) the page's link names, else at the first step; the
    line about what the link named that could not be opened."""
    key, notes = open_link(ctx, request_link(request))
    if ctx.replay is None or not ctx.replay.steps:
        return (*(gr.update() for _ in view.switch_outputs), notice_html(notes))
    out = step_outputs(ctx, key, baseline=view.baseline_of(request))
    view.painted(request, out.step_key)
    return (*view.updates(out), notice_html(notes))


def load_outputs(view: CompareTab) -> list:
    """What `load_compare` fills: the switch's outputs and the link's line."""
    return [*view.switch_outputs, view.link_note]


def wire_compare_link(ctx: LabContext, view: CompareTab, box: gr.Textbox) -> None:
    """The link follows the step (every switch: a pick, j/k, a step opened from another tab) and the columns
    (when the tab is shown again); the address bar follows the link."""
    from lab.ui.shell.wiring import bind

    make = bind(compare_link, ctx)
    view.step.change(make, view.step, box, api_visibility="private", show_progress="hidden", trigger_mode="always_last")
    view.tab.select(make, view.step, box, api_visibility="private", show_progress="hidden")
    follow_in_address_bar(box, view.tab, LINK_ID)
