"""Compare's what-if panel: edit the step's task, an earlier turn, the terminal screen or the
system prompt, re-run the edited step on every engine, replay saved edits, export them."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator

import gradio as gr

from lab.errors import LabError
from lab.workspace import EngineEntry, LabContext, LRUCache
from lab.ui.compare.step_data import answer_step, engine_view
from lab.ui.compare.step_view import EngineView
from lab.ui.compare.whatif_render import WHATIF_CSS, render_whatif_results
from lab.ui.shell.wiring import bind
from lab.whatif.apply import field_spans, field_text
from lab.whatif.edit import FieldEdit, WhatIf
from lab.whatif.run import WhatIfResult, run_whatif
from lab.whatif.store import DuckWhatIfStore, SessionWhatIfStore, WhatIfKeeper, export_jsonl
from lab.whatif.validate import limits

_SESSIONS = LRUCache(limits()["max_whatif_sessions"])  # session hash -> SessionWhatIfStore (public labs)
_SHARED: dict[int, DuckWhatIfStore] = {}
_SHARED_LOCK = threading.Lock()


class LockedKeeper:
    """A keeper whose calls hold the lab's store (`hold`: LabContext.store_session; the tabs share one DuckDB
    connection)."""

    def __init__(self, keeper: WhatIfKeeper, hold: Callable[[], ContextManager]) -> None:
        self._keeper, self._hold = keeper, hold
        self.shared = keeper.shared

    def __getattr__(self, name: str):
        method = getattr(self._keeper, name)

        def call(*args, **kwargs):
            with self._hold():
                return method(*args, **kwargs)

        return call


def keeper_for(ctx: LabContext, session: str | None) -> WhatIfKeeper:
    """The shared store's what-if tables when the lab allows it, else this session's memory."""
    if ctx.settings.whatif_shared and ctx.store is not None:
        with _SHARED_LOCK:
            known = _SHARED.get(id(ctx.store))
            if known is None or known.store is not ctx.store:  # an id can be reused after a store closes
                with ctx.store_session() as store:
                    _SHARED[id(store)] = DuckWhatIfStore(store)
            return LockedKeeper(_SHARED[id(ctx.store)], ctx.store_session)
    session = session or "-"
    keeper = _SESSIONS.get(session)
    if keeper is None:
        keeper = SessionWhatIfStore()
        _SESSIONS.put(session, keeper)
    return keeper


def text_arguments(**values: object) -> None:
    """The handlers' text arguments must be text (or empty): anything else is one-line gr.Error."""
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            raise gr.Error(f"what-if: '{name}' must be text, got {type(value).__name__}", print_exception=False)


def where_kept(keeper: WhatIfKeeper) -> str:
    return ("kept in the store's whatif_* tables, never in a run's score" if keeper.shared
            else "kept in this browser session only (not written to the shared store)")


def field_choices(ctx: LabContext, key: str | None) -> list[tuple[str, str]]:
    step = ctx.replay.by_key.get(key) if ctx.replay and key else None
    return [(s.label, s.field) for s in field_spans(step)] if step else []


def default_field(choices: list[tuple[str, str]]) -> str | None:
    """The terminal screen when the step has one (the most common hypothesis), else the task."""
    names = [c[1] for c in choices]
    return next((f for f in ("screen", "task") if f in names), names[0] if names else None)


def _original(ctx: LabContext, entry: EngineEntry, step) -> EngineView:
    """The engine's unedited answer: Compare's cached column, generated now when missing."""
    view = engine_view(ctx, entry, step)
    return view if view.state == "ready" else answer_step(ctx, entry, step)


def run_on_engines(ctx: LabContext, keeper: WhatIfKeeper, whatif: WhatIf,
                   entries: list[EngineEntry]) -> Iterator[list[tuple[EngineView | None, WhatIfResult | None, str]]]:
    """Answer the original and the edited step on every engine concurrently; yield as each finishes."""
    step = ctx.replay.by_key[whatif.step_key]
    pairs: dict[str, tuple] = {e.name: (None, None, e.name) for e in entries}
    yield list(pairs.values())
    done: queue.Queue = queue.Queue()

    def work(entry: EngineEntry) -> None:
        original = _original(ctx, entry, step)
        result = run_whatif(entry.engine, step, whatif, spec=entry.spec, name=entry.name, kind=entry.kind)
        try:
            keeper.save_result(result)
        except Exception as exc:  # noqa: BLE001 - shown in the column; the answer stays on the page
            result.error = (result.error + "; " if result.error else "") + f"not saved: {exc}"
        done.put((entry.name, (original, result, entry.name)))

    for entry in entries:
        threading.Thread(target=work, args=(entry,), name="lab-whatif", daemon=True).start()
    for _ in entries:
        name, pair = done.get()
        pairs[name] = pair
        yield list(pairs.values())


def saved_choices(keeper: WhatIfKeeper, key: str | None) -> list[tuple[str, str]]:
    if not key:
        return []
    return [(f"{w.edit_id} · {', '.join(w.fields)}{' · ' + w.note if w.note else ''}", w.edit_id)
            for w in keeper.edits(key)]


def engine_choices(ctx: LabContext) -> list[str]:
    return [e.name for e in ctx.engine_entries() if e.state == "ready"]


def saved_results_html(ctx: LabContext, keeper: WhatIfKeeper, edit_id: str, full: bool = False) -> str:
    """A saved what-if's recorded answers, each beside the engine's original answer when loaded."""
    whatif = keeper.get_edit(edit_id)
    step = ctx.replay.by_key.get(whatif.step_key) if ctx.replay else None
    entries = {e.name: e for e in ctx.engine_entries()}
    pairs = []
    for result in keeper.results(edit_id):
        entry = entries.get(result.engine_name)
        original = engine_view(ctx, entry, step) if entry is not None and step is not None else None
        if entry is not None and entry.engine is not None and step is not None:
            with_prompts(result, entry.engine, step, whatif)
        pairs.append((original if original is not None and original.state == "ready" else None, result,
                      result.engine_name))
    return render_whatif_results(whatif, pairs, where_kept(keeper), full)


def with_prompts(result: WhatIfResult, engine, step, whatif: WhatIf) -> None:
    """Fill a stored result's original and edited prompts (only its patch is stored) by rendering
    the step again for its engine, when that engine is loaded; left empty on any failure."""
    from lab.prompts.engine_prompt import render_for_engine
    from lab.whatif.apply import apply_whatif

    if result.original_prompt or result.edited_prompt:
        return
    try:
        result.original_prompt = render_for_engine(engine, step).text
        result.edited_prompt = render_for_engine(engine, apply_whatif(step, whatif)).text
    except Exception:  # noqa: BLE001 - the stored patch is shown instead
        result.original_prompt = result.edited_prompt = ""


def session_of(request: gr.Request | None) -> str | None:
    """The request's session, or None outside a request."""
    return request.session_hash if request is not None else None


def step_picked(ctx: LabContext, key: str | None, request: gr.Request | None = None):
    """A step picked: its fields (the default one's text), its saved what-ifs, the ready engines."""
    text_arguments(step=key)
    choices = field_choices(ctx, key)
    chosen = default_field(choices)
    step_obj = ctx.replay.by_key.get(key) if ctx.replay and key else None
    value = field_text(step_obj, chosen) if step_obj is not None and chosen else ""
    keeper = keeper_for(ctx, session_of(request))
    return (gr.update(choices=choices, value=chosen), gr.update(value=value),
            gr.update(choices=saved_choices(keeper, key), value=None),
            gr.update(choices=engine_choices(ctx), value=None), "")


def field_text_of(ctx: LabContext, key: str | None, name: str | None):
    """The text of field `name` of step `key` (to edit, or to reset an edit)."""
    text_arguments(step=key, field=name)
    step_obj = ctx.replay.by_key.get(key) if ctx.replay and key else None
    if step_obj is None or not name:
        return gr.update()
    try:
        return gr.update(value=field_text(step_obj, name))
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update()


def run_edit(ctx: LabContext, key: str | None, name: str | None, new_text: str, note_text: str, full: bool,
             request: gr.Request | None = None):
    """Save the edit and re-run the edited step on every ready engine, each beside its original answer."""
    text_arguments(step=key, field=name, text=new_text, note=note_text)
    ctx.visitor_used()  # runs the edit on the engines: a generation
    step_obj = ctx.replay.by_key.get(key) if ctx.replay and key else None
    if step_obj is None or not name:
        gr.Warning("Pick a step and a field to edit first.")
        return
    keeper = keeper_for(ctx, session_of(request))
    try:
        whatif = WhatIf(key, (FieldEdit(name, field_text(step_obj, name), new_text or ""),), note_text or "",
                        created_by="owner" if keeper.shared else "session")
        keeper.save_edit(whatif)
    except LabError as exc:
        gr.Warning(str(exc))
        return
    entries = [e for e in ctx.engine_entries() if e.state == "ready" and e.engine is not None]
    for pairs in run_on_engines(ctx, keeper, whatif, entries):
        yield render_whatif_results(whatif, pairs, where_kept(keeper), bool(full)), gr.update()
    yield (render_whatif_results(whatif, pairs, where_kept(keeper), bool(full)),
           gr.update(choices=saved_choices(keeper, key), value=whatif.edit_id))


def show_saved(ctx: LabContext, edit_id: str | None, full: bool, request: gr.Request | None = None):
    """A saved what-if's recorded answers."""
    text_arguments(edit=edit_id)
    if not edit_id:
        return gr.update()
    try:
        return saved_results_html(ctx, keeper_for(ctx, session_of(request)), edit_id, bool(full))
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update()


def replay_saved(ctx: LabContext, edit_id: str | None, engine_name: str | None, full: bool,
                 request: gr.Request | None = None):
    """Run a saved what-if again on one engine; its recorded answers then."""
    text_arguments(edit=edit_id, engine=engine_name)
    ctx.visitor_used()  # a replay on an engine is a generation
    keeper = keeper_for(ctx, session_of(request))
    entry = next((e for e in ctx.engine_entries() if e.name == engine_name and e.state == "ready"), None)
    if not edit_id or entry is None:
        gr.Warning("Pick a saved what-if and a ready engine first.")
        return gr.update()
    try:
        whatif = keeper.get_edit(edit_id)
    except LabError as exc:
        gr.Warning(str(exc))
        return gr.update()
    if ctx.replay is None or whatif.step_key not in ctx.replay.by_key:
        gr.Warning(f"step {whatif.step_key} is not in the loaded replay data")
        return gr.update()
    for _ in run_on_engines(ctx, keeper, whatif, [entry]):
        pass
    return saved_results_html(ctx, keeper, edit_id, bool(full))


def export_whatifs(ctx: LabContext, request: gr.Request | None = None):
    """Every what-if the visitor (or the shared store) holds, as a JSONL file."""
    keeper = keeper_for(ctx, session_of(request))
    from lab.ui.shell.exports import EXPORTS, download_html  # short-lived, swept folders, removed at exit

    path = EXPORTS.new_dir() / "whatifs.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        n = export_jsonl(keeper, handle)
    gr.Info(f"exported {n} what-if edit(s)")
    return gr.update(value=download_html(path, f"{n} edit{'s' if n != 1 else ''}"), visible=True)


@dataclass
class WhatIfView:
    """The panel's components (for tests and other tabs)."""

    field: gr.Dropdown
    text: gr.Textbox
    run: gr.Button
    out: gr.HTML
    ran: object = None  # the re-run event (Compare chains a refresh of its columns on it)


def build_whatif_view(ctx: LabContext, step: gr.Dropdown, show_all: gr.Checkbox) -> WhatIfView:
    """Lay out the what-if panel (inside Compare's tab) and wire it to the step picker."""
    first_choices = field_choices(ctx, step.value)
    first_field = default_field(first_choices)
    first_step = ctx.replay.by_key.get(step.value) if ctx.replay and step.value else None
    first_text = field_text(first_step, first_field) if first_step is not None and first_field else ""
    with gr.Accordion("What-if: edit this step's context and re-run it", open=False, elem_id="lab-whatif"):
        gr.HTML(WHATIF_CSS + '<div class="lab-muted">Edit the task, an earlier turn, the last terminal screen '
                "or the system prompt; every engine renders the edited step its own way. What-if answers are "
                "marked, kept apart from runs, and never count in a run's score.</div>")
        with gr.Row():
            field = gr.Dropdown(first_choices, value=first_field, label="field to edit", elem_id="lab-whatif-field", scale=2,
                                allow_custom_value=True)
            note = gr.Textbox(label="note (optional)", elem_id="lab-whatif-note", scale=3, max_lines=1)
        text = gr.Textbox(first_text, label="edited text", lines=10, max_lines=30, elem_id="lab-whatif-text")
        with gr.Row():
            run = gr.Button("Re-run edited step on all engines", variant="primary", elem_id="lab-whatif-run")
            reset = gr.Button("Reset text", elem_id="lab-whatif-reset")
        out = gr.HTML(elem_id="lab-whatif-out")
        with gr.Row():
            saved = gr.Dropdown([], label="saved what-ifs of this step", elem_id="lab-whatif-saved", scale=3,
                                allow_custom_value=True)
            engine = gr.Dropdown(engine_choices(ctx), label="engine", elem_id="lab-whatif-engine", scale=2, allow_custom_value=True)
            replay = gr.Button("Replay saved edit on engine", elem_id="lab-whatif-replay", scale=1)
            export = gr.Button("Export what-ifs (JSONL)", elem_id="lab-whatif-export", scale=1)
        export_file = gr.HTML(visible=False, elem_id="lab-whatif-file")  # a download link (lab.ui.shell.exports)

    reset_inputs = [step, field]
    step.change(bind(step_picked, ctx), step, [field, text, saved, engine, out], show_progress="hidden",
                api_visibility="private")
    field.input(bind(field_text_of, ctx), reset_inputs, text, show_progress="hidden", api_visibility="private")
    reset.click(bind(field_text_of, ctx), reset_inputs, text, show_progress="hidden", api_visibility="private")
    ran = run.click(bind(run_edit, ctx), [step, field, text, note, show_all], [out, saved], show_progress="minimal",
                    api_name="whatif_run")
    saved.input(bind(show_saved, ctx), [saved, show_all], out, show_progress="hidden", api_visibility="private")
    replay.click(bind(replay_saved, ctx), [saved, engine, show_all], out, show_progress="minimal",
                 api_name="whatif_replay")
    export.click(bind(export_whatifs, ctx), None, export_file, show_progress="hidden", api_name="whatif_export")
    return WhatIfView(field, text, run, out, ran)
