"""Compare's run picker: any run of the store (published or lab-made) becomes a column, no path typed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import gradio as gr

from lab.errors import LabError
from lab.workspace import LabContext

LEGACY = "legacy_386"


def run_choices(ctx: LabContext) -> list[tuple[str, str]]:
    """(label, run_id) of every stored run with per-step answers: name, source, steps, score, scorer."""
    if ctx.store is None:
        return []
    try:
        df = ctx.query(
            "SELECT run_id, display_name, source, steps, score, scoring_version FROM runs "
            "ORDER BY source = 'published', display_name, run_id"
        )
    except LabError:
        return []
    out = []
    for r in df.itertuples(index=False):
        score = "" if r.score is None or r.score != r.score else f" · score {r.score:.2f}"
        legacy = " · legacy 386-step scorer" if r.scoring_version == LEGACY else ""
        out.append((f"{r.display_name} · {r.source} · {int(r.steps)} steps{score}{legacy}", str(r.run_id)))
    return out


def scorer_note(ctx: LabContext, run_id: str) -> str | None:
    """What a column of a legacy run is compared with, said once when it is added (None otherwise)."""
    from lab.ui.compare.legacy_column import legacy_replay_of

    df = ctx.query("SELECT display_name, scoring_version FROM runs WHERE run_id = ?", [run_id])
    if df.empty or df.iloc[0]["scoring_version"] != LEGACY:
        return None
    legacy, problem = legacy_replay_of(ctx)
    name = df.iloc[0]["display_name"]
    if legacy is not None:
        from lab.security.paths import display_path

        return (f"{name}: a legacy 386-step run, shown on its own steps of the legacy replay "
                f"({display_path(legacy.path, ctx.settings)}) and "
                "scored with the legacy scorer; steps it was never asked are marked 'not in this run'.")
    from lab.data.legacy_replay import missing_legacy_replay_message

    return f"{name}: a legacy 386-step run; {problem or missing_legacy_replay_message()}."


@dataclass
class RunPicker:
    runs: gr.Dropdown
    add: gr.Button


def build_run_picker(ctx: LabContext) -> RunPicker:
    """The picker row (inside the Compare tab's layout)."""
    with gr.Row(equal_height=True, elem_id="lab-run-picker-row"):
        runs = gr.Dropdown(run_choices(ctx), multiselect=True, value=[], scale=5, elem_id="lab-run-picker",
                           label="stored runs as columns (published or lab-made; type to filter)")
        add = gr.Button("Add as columns", scale=1, elem_id="lab-run-add", min_width=140)
    return RunPicker(runs, add)


def add_runs(ctx: LabContext, run_ids: list[str]) -> list[str]:
    """Add each run as a `stored:` column; messages for the user (added names, legacy notes, problems)."""
    messages = []
    for run_id in run_ids or []:
        try:
            name = ctx.add_stored_run(run_id)
        except LabError as exc:
            messages.append(f"warning:{exc}")
            continue
        note = scorer_note(ctx, run_id)
        messages.append(f"info:{note}" if note else f"info:added column {name}")
    return messages


def wire_run_picker(ctx: LabContext, picker: RunPicker, outputs: list,
                    redraw: Callable[[str | None, gr.Request | None], tuple], step: gr.Dropdown, tab: gr.Tab) -> None:
    """Add the picked runs, then redraw the current step through `redraw(key, request)` (Compare's updates for
    `outputs`, passed in by the tab); the choices refresh when the tab opens."""

    def on_add(run_ids: list[str], key: str | None, request: gr.Request):
        for message in add_runs(ctx, list(run_ids or [])):
            kind, text = message.split(":", 1)
            (gr.Warning if kind == "warning" else gr.Info)(text)
        if ctx.replay is None:
            return (gr.update(value=[]), *(gr.update() for _ in outputs))
        return (gr.update(choices=run_choices(ctx), value=[]), *redraw(key, request))

    picker.add.click(on_add, [picker.runs, step], [picker.runs, *outputs], api_name="add_runs")
    tab.select(lambda: gr.update(choices=run_choices(ctx)), None, picker.runs, api_visibility="private",
               show_progress="hidden")
    gr.on(triggers=None, fn=lambda: gr.update(choices=run_choices(ctx)), outputs=picker.runs,
          api_visibility="private", show_progress="hidden")  # a page (re)load lists runs added since start
