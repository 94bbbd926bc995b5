"""Triage's link: the slice's filters as today (`run_ids=…&f1_max=…`), with `tab=triage` and the pair compared
(`baseline=RUN&candidate=RUN`): the link opens Triage on that slice with the pair's comparison shown; the share
box follows the filters applied and the pair picked."""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import gradio as gr

from lab.errors import LabError
from lab.ui.shell.links import Link, link_url, notice_html, request_link, shown
from lab.ui.shell.run_refs import run_of, run_ref
from lab.ui.triage.filters import spec_from_inputs
from lab.workspace import LabContext

PAIR = ("baseline", "candidate")


def triage_link(ctx: LabContext, base: str, picked: Any, baseline: Any, candidate: Any, *values: Any) -> Any:
    """The link that reopens Triage with the filters' slice and, once `picked` (by hand or by a link: not the
    pickers' first choices), the pair (unchanged when a filter is bad)."""
    try:
        spec = spec_from_inputs(*values)
    except LabError:
        return gr.update()
    pair = []
    if picked is True and isinstance(baseline, str) and isinstance(candidate, str) and baseline and candidate \
            and baseline != candidate:
        pair = [("baseline", run_ref(ctx, baseline)), ("candidate", run_ref(ctx, candidate))]  # a pair picked
    return link_url(base, "triage", [*parse_qsl(spec.to_query()), *pair])


def linked_pair(ctx: LabContext, link: Link, runs: list[str]) -> tuple[list[str | None], list[str]]:
    """The baseline and candidate run ids a link names (None where it names none, or a run not among `runs`:
    the pickers' choices), and the lines about those it could not open."""
    ids: list[str | None] = []
    notes: list[str] = []
    for role in PAIR:
        ref = link.get(role)
        if not ref:
            ids.append(None)
            continue
        try:
            run_id = run_of(ctx, ref)
        except LabError:
            run_id = None
        if run_id is None or run_id not in runs:
            notes.append(f"the link's {role} '{shown(ref)}' is no run here; pick one under Baseline vs candidate")
            run_id = None
        ids.append(run_id)
    return ids, notes


def pair_from_request(ctx: LabContext, request: gr.Request | None, runs: list[str]) -> tuple[list, str, Any]:
    """Page load: the pair the link names, the line about it, and the pair's accordion (opened for a pair)."""
    ids, notes = linked_pair(ctx, request_link(request), runs)
    return ids, notice_html(notes), gr.update(open=True) if any(ids) or notes else gr.update()


def link_names_pair(request: gr.Request) -> bool:
    """Whether the page's link named a pair (then the pair shown is the link's, and its link keeps it)."""
    link = request_link(request)
    return bool(link.get("baseline") and link.get("candidate"))


def picked_by_hand() -> bool:
    return True


def compare_linked_pair(compare_pair, ctx: LabContext, base: Any, cand: Any, which: str,
                        request: gr.Request) -> tuple:
    """After the page loaded a link naming both runs of the pair: their comparison (else nothing changes)."""
    link = request_link(request)
    if not (link.get("baseline") and link.get("candidate") and base and cand):
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return compare_pair(ctx, base, cand, which)
