"""The Compare tab's handlers: what each of its events does, as module-level functions of the lab's context, the
tab's state (CompareTab) and the widgets' values, that tests call without a browser; lab.ui.compare.tab lays out
the tab and wires them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.data.step import Step
from lab.ui.compare.answers import follow_views, generate_views, warm_instant_engines
from lab.ui.compare.audit_panel import audit_answer, column_audits
from lab.ui.compare.inflight import inflight_of
from lab.ui.compare.legacy_column import scorer_badge_html
from lab.ui.compare.render_html import render_columns, render_context, render_f1_gap
from lab.ui.compare.step_data import StepData, engine_view, heat_choices, heatmap_for, step_data
from lab.ui.compare.step_view import EngineView, f1_gap
from lab.ui.compare.stored_pair import RunBlock, run_block
from lab.ui.shell.html_text import esc
from lab.ui.shell.links import shown
from lab.workspace import EngineEntry, LabContext, LRUCache

def step_choices(ctx: LabContext, task_id: str) -> list[tuple[str, str]]:
    """(label, key) for every step of one task."""
    steps = ctx.replay.steps_for_task(task_id) if ctx.replay else []
    return [(f"step {s.step_idx} · {s.bucket}", s.key) for s in steps]


def task_choices(ctx: LabContext) -> list[tuple[str, str]]:
    """(label, task_id) for every task of the replay set."""
    if not ctx.replay:
        return []
    first = {}
    for s in ctx.replay.steps:
        first.setdefault(s.task_id, s)
    return [(f"{t} · {first[t].source_group} · {len(ctx.replay.steps_for_task(t))} scored steps", t) for t in ctx.replay.tasks]


def neighbour_key(ctx: LabContext, key: str | None, offset: int) -> str | None:
    """The key `offset` steps away in dataset order (clamped at both ends)."""
    if not ctx.replay or not ctx.replay.steps:
        return None
    keys = ctx.step_keys()
    pos = keys.index(key) if key in ctx.replay.by_key else 0
    return keys[max(0, min(len(keys) - 1, pos + offset))]


def audit_reply(ctx: LabContext, request: object) -> str:
    """/prompt_audit: the audit, or '' and one warning line for a malformed request."""
    answer = audit_answer(ctx, request)
    if not answer:
        gr.Warning("prompt_audit: give JSON [engine name, step key], two strings")
    return answer


def step_key_argument(key: object) -> str | None:
    """A handler's step argument: a step key (text) or None; anything else is one-line gr.Error."""
    if key is None or isinstance(key, str):
        return key
    raise gr.Error(f"the step must be a step key (text), got {type(key).__name__}", print_exception=False)


def step_columns_html(ctx: LabContext, entries: list[EngineEntry], step: Step, views: list[EngineView], full: bool,
                 badges: dict[str, str]) -> str:
    """The engine columns of `step`, with each column's prompt audit panel."""
    return render_columns(views, full, badges, column_audits(ctx, entries, step), step.key)



def column_badges(ctx: LabContext, entries: list[EngineEntry], step_key: str) -> dict[str, str]:
    """Engine name -> tags/notes badges (lab.triage) of this step, for every stored engine whose
    result file is a run in the store; engines without tags are left out."""
    from lab.triage.annotations import step_badges_html

    # every stored column says which scorer and replay it is compared on
    badges = {e.name: scorer_badge_html(ctx, e) for e in entries if e.stored_path is not None}
    if ctx.store is None:
        return badges
    for entry in entries:
        path = entry.stored_path
        run_id = ctx.stored_run_id(path) if path is not None else None
        if run_id is None:
            continue
        try:
            with ctx.store_session() as store:
                html = step_badges_html(store, run_id, step_key)
        except Exception:  # noqa: BLE001 - badges are decoration; a store hiccup must not break Compare
            continue
        if html:
            badges[entry.name] = badges.get(entry.name, "") + html
    return badges


@dataclass
class StepOutputs:
    """What a step switch sends to the browser (in the order of CompareTab.switch_outputs)."""

    task_id: str
    step_choices: list[tuple[str, str]]
    step_key: str
    context_html: str
    columns_html: str
    f1_html: str
    heat_choices: list[tuple[str, str]]
    heat_engine: str | None
    heat_figure: Any
    run_block: RunBlock = field(default_factory=RunBlock)  # the stored columns' run-level block and its baseline


def step_outputs(ctx: LabContext, key: str | None, full: bool = False, heat_engine: str | None = None,
                 baseline: str | None = None) -> StepOutputs:
    """Everything Compare shows for step `key` (stored and reference engines answer at once); the run-level
    block against `baseline` (a stored column's run id; None: the first stored column)."""
    return outputs_of(ctx, step_data(ctx, step_key_argument(key), heat_engine), full, baseline)


def outputs_of(ctx: LabContext, data: StepData, full: bool = False, baseline: str | None = None) -> StepOutputs:
    """A step's data as the HTML and choices a step switch sends."""
    step, entries, views = data.step, data.entries, data.views
    return StepOutputs(
        task_id=step.task_id,
        step_choices=step_choices(ctx, step.task_id),
        step_key=step.key,
        context_html=render_context(data.view, full),
        columns_html=step_columns_html(ctx, entries, step, views, full, column_badges(ctx, entries, step.key)),
        f1_html=render_f1_gap(data.view.f1_gap),
        heat_choices=heat_choices(views),
        heat_engine=data.heat_engine,
        heat_figure=data.heat_figure,
        run_block=run_block(ctx, entries, baseline),  # the verdict above one step
    )


@dataclass
class CompareTab:
    """The Compare tab's components other tabs need (to open a step or refresh the columns)."""

    tab: gr.Tab
    task: gr.Dropdown
    step: gr.Dropdown
    show_all: gr.Checkbox
    heat_engine: gr.Dropdown
    switch_outputs: list
    replay_loaded: Any = None  # event fired after a replay download (others chain `.then` on it)
    link: Any = None  # the "copy link" box and the line about a link's names (lab.ui.compare.link)
    link_note: Any = None
    warm: Callable[[], object] | None = None  # warm_instant_engines for this lab (the Engines tab calls it)
    # session -> the step painted last, by a switch in Compare, a step opened from another tab, or a Generate
    # as it began: a Generate of another step stops painting
    shown: LRUCache = field(default_factory=lambda: LRUCache(1024))
    # session -> (the step its last prev/next came from, the step it went to)
    moves: LRUCache = field(default_factory=lambda: LRUCache(1024))
    # session -> the run id of the stored column its run-level block compares against (none: the first column)
    baselines: LRUCache = field(default_factory=lambda: LRUCache(1024))

    def painted(self, request: gr.Request | None, key: str | None) -> None:
        """Note that `request`'s session shows step `key` from now on (a switch's paint as it leaves, or a
        Generate as it begins on the step the browser sent)."""
        if request is not None and request.session_hash:
            self.shown.put(request.session_hash, key)

    def baseline_of(self, request: gr.Request | None) -> str | None:
        """The baseline `request`'s session picked for the run-level block (None: the first stored column)."""
        return self.baselines.get(request.session_hash) if request is not None and request.session_hash else None

    def updates(self, out: StepOutputs, heat: bool = True) -> tuple:
        """gr updates for `switch_outputs` from a StepOutputs. `heat=False` leaves the heatmap to an event
        chained after the switch (prev/next/step/task), so the columns paint without waiting for it."""
        return (
            gr.update(value=out.task_id),
            gr.update(choices=out.step_choices, value=out.step_key),
            out.context_html,
            out.columns_html,
            out.f1_html,
            gr.update(choices=out.heat_choices, value=out.heat_engine),
            out.heat_figure if heat else gr.update(),
            *block_updates(out.run_block),
        )


def block_updates(block: RunBlock) -> tuple:
    """The baseline picker (the stored columns; shown with two or more) and the run-level block."""
    return gr.update(choices=block.choices, value=block.baseline, visible=len(block.choices) >= 2), block.html


def pick_baseline(ctx: LabContext, view: CompareTab, run_id: object, request: gr.Request | None = None) -> tuple:
    """The run-level block against the stored column picked as its baseline; the session keeps it for the
    steps it opens next. A run that is no stored column (any more) is said in one line; the first column is used."""
    if run_id is not None and not isinstance(run_id, str):
        raise gr.Error(f"the baseline must be a run id (text), got {type(run_id).__name__}", print_exception=False)
    block = run_block(ctx, ctx.engine_entries(), run_id)
    if run_id and block.baseline != run_id:
        gr.Warning(esc(f"'{shown(run_id)}' is no stored column of Compare now; the block compares against the first "
                       "one"))
    if request is not None and request.session_hash:
        view.baselines.put(request.session_hash, block.baseline)
    return block_updates(block)


def show_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool, heat: str | None,
              request: gr.Request | None = None, heat_now: bool = True) -> tuple:
    """Switch to step `key` (its columns, context, F1 box; the heatmap unless `heat_now` is False)."""
    key = step_key_argument(key)
    if request is not None:
        view.moves.drop(lambda k: k == request.session_hash)
    if ctx.replay is None:
        return tuple(gr.update() for _ in view.switch_outputs)
    out = step_outputs(ctx, key, bool(full), heat, view.baseline_of(request))
    view.painted(request, out.step_key)  # as it leaves: of two switches at once, the one painted last counts
    return view.updates(out, heat=heat_now)


def refresh_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool, heat: str | None,
                 request: gr.Request | None = None) -> tuple:
    """The step the page shows, painted again (the tab shown again, "show all" toggled, what-if's originals
    made). Not a switch: when the session moves to another step meanwhile (`j` pressed as the tab opens),
    nothing is painted, so the older step never lands over the one the user moved to."""
    key = step_key_argument(key)
    unchanged = tuple(gr.skip() for _ in view.switch_outputs)
    if ctx.replay is None or moved_on(view, request, key):
        return unchanged
    out = step_outputs(ctx, key, bool(full), heat, view.baseline_of(request))
    if moved_on(view, request, out.step_key):  # a switch painted another step while this one was drawn
        return unchanged
    view.painted(request, out.step_key)
    return view.updates(out)


def show_task(ctx: LabContext, view: CompareTab, task_id: str, full: bool, heat: str | None,
              request: gr.Request | None = None, heat_now: bool = True) -> tuple:
    """Switch to the first step of task `task_id`."""
    steps = ctx.replay.steps_for_task(task_id) if ctx.replay else []
    return show_step(ctx, view, steps[0].key if steps else None, full, heat, request, heat_now)


def show_step_fast(ctx: LabContext, view: CompareTab, key: str | None, full: bool, heat: str | None,
                   request: gr.Request | None = None) -> tuple:
    """`show_step`, leaving the heatmap to the event chained after it."""
    return show_step(ctx, view, key, full, heat, request, heat_now=False)


def show_task_fast(ctx: LabContext, view: CompareTab, task_id: str, full: bool, heat: str | None,
                   request: gr.Request | None = None) -> tuple:
    """`show_task`, leaving the heatmap to the event chained after it."""
    return show_task(ctx, view, task_id, full, heat, request, heat_now=False)


def move_step(ctx: LabContext, view: CompareTab, offset: int, key: str | None, full: bool, heat: str | None,
              request: gr.Request | None = None) -> tuple:
    """prev/next: the step `offset` steps away. A press made before the previous move's answer arrived still
    carries the old step: it continues from where that move went, so `j j` moves two steps even on a slow
    server. The heatmap follows in its own event."""
    key = step_key_argument(key)
    session = request.session_hash if request is not None else None
    last = view.moves.get(session) if session else None
    base = last[1] if last and last[0] == key else key
    target = neighbour_key(ctx, base, offset)
    if session:
        view.moves.put(session, (key, target))
    if ctx.replay is None:
        return show_step(ctx, view, None, full, heat)
    out = step_outputs(ctx, target, bool(full), heat, view.baseline_of(request))
    view.painted(request, out.step_key)
    return view.updates(out, heat=False)  # the heatmap follows


def draw_heat(ctx: LabContext, key: str | None, heat: str | None) -> Any:
    """The heatmap of the step shown, in its own event after a switch has painted the columns."""
    key = step_key_argument(key)
    if ctx.replay is None or key not in ctx.replay.by_key:
        return gr.update()
    step_obj = ctx.replay.by_key[key]
    views = [engine_view(ctx, e, step_obj, compute_instant=False) for e in ctx.engine_entries()]
    return heatmap_for(ctx, step_obj, views, heat)[0]


def moved_on(view: CompareTab, request: gr.Request | None, key: str) -> bool:
    """The session switched to another step since a Generate (or a follow) of step `key` began: its columns
    must not be painted over that step's (the answers still land in the cache and show when `key` is
    opened again)."""
    session = request.session_hash if request is not None else None
    painted = view.shown.get(session) if session else None
    return painted is not None and painted != key


def columns_painter(ctx: LabContext, step_obj: Step, full: bool) -> Callable[[list[EngineView]], str]:
    """HTML of the columns of the engines of each moment (one picked or removed meanwhile included); their
    badges are read again only when the engines change."""
    names: list[str] | None = None
    badges: dict[str, str] = {}

    def paint(columns: list[EngineView]) -> str:
        nonlocal names, badges
        entries = ctx.engine_entries()
        if [e.name for e in entries] != names:
            names, badges = [e.name for e in entries], column_badges(ctx, entries, step_obj.key)
        return step_columns_html(ctx, entries, step_obj, columns, bool(full), badges)

    return paint


def generate_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool, heat: str | None,
                  request: gr.Request | None = None) -> Iterator[tuple]:
    """Generate on every ready engine: the columns as answers arrive, then the F1 box and the heatmap."""
    key = step_key_argument(key)
    if ctx.replay is None or key not in ctx.replay.by_key:
        gr.Warning("Pick a step first (no replay data loaded).")
        return
    ctx.visitor_used()  # a generation: a visitor's engines are in use
    if not any(e.state == "ready" for e in ctx.engine_entries()):
        gr.Info("No ready engine: add one in the Engines tab.")
    # the step this Generate paints is the one the session shows now, until a switch paints another
    view.painted(request, key)
    step_obj = ctx.replay.by_key[key]
    columns_now = columns_painter(ctx, step_obj, bool(full))
    views: list[EngineView] = []  # the run-level block above the F1s stays as the switch painted it
    for views in generate_views(ctx, key):
        if moved_on(view, request, key):
            continue  # keep generating into the cache, paint nothing
        yield columns_now(views), render_f1_gap(f1_gap(views)), gr.update(), gr.update(), gr.update()
    if moved_on(view, request, key):
        return
    fig, spec = heatmap_for(ctx, step_obj, views, heat)
    yield (columns_now(views), render_f1_gap(f1_gap(views)),
           gr.update(choices=heat_choices(views), value=spec), fig, gr.update())


def follow_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool,
                request: gr.Request | None = None) -> Iterator[tuple]:
    """The answers to the step shown that are being generated (started by another Generate, another page, a
    page since reloaded): "generating…" with their progress until each is in; nothing when none runs."""
    key = step_key_argument(key)
    painted = False
    if ctx.replay is not None and key in ctx.replay.by_key and inflight_of(ctx).running_on(key):
        columns_now = columns_painter(ctx, ctx.replay.by_key[key], bool(full))
        for views in follow_views(ctx, key):
            if moved_on(view, request, key):
                break
            painted = True
            yield columns_now(views), render_f1_gap(f1_gap(views))
    if not painted:  # nothing to follow: what the page shows stays (an end without output would clear it)
        yield gr.skip(), gr.skip()


def download_replay(ctx: LabContext, view: CompareTab) -> tuple:
    """Download the public replay file (the owner's lab only): the banner and button go, the first step shows."""
    unchanged = (gr.update(), gr.update()) + tuple(gr.update() for _ in view.switch_outputs)
    if ctx.settings.public:  # the replay is the owner's (LAB_REPLAY); a visitor never replaces it
        gr.Warning("This public deployment does not let visitors download or replace the replay.")
        return unchanged
    try:
        ctx.download_replay()
    except Exception as exc:  # noqa: BLE001 - shown to the user, never a traceback
        gr.Warning(f"Download failed: {exc}. Point the lab at a local replay file instead: {LOCAL_REPLAY_HINT}.")
        return unchanged
    gr.Info(f"Replay loaded: {len(ctx.replay.steps)} steps from {ctx.replay.path}")
    warm_instant_engines(ctx)
    out = step_outputs(ctx, None)
    ups = list(view.updates(out))
    ups[0] = gr.update(choices=task_choices(ctx), value=out.task_id)
    return (gr.update(visible=False), gr.update(visible=False), *ups)


def page_loaded(ctx: LabContext) -> tuple:
    """A reload after the replay arrived (in another tab or session): no banner, the tasks listed."""
    if ctx.replay is None:
        return gr.update(), gr.update(), gr.update()
    return gr.update(visible=False), gr.update(visible=False), gr.update(choices=task_choices(ctx))
