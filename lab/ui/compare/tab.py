"""The Compare tab: one step, its context, one column per engine, the diff, heatmap and F1 gap."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.data.step import Step
from lab.settings import PROJECT_ROOT
from lab.ui.compare.audit_panel import audit_answer, column_audits
from lab.workspace import EngineEntry, LabContext, LRUCache
from lab.ui.compare.legacy_column import scorer_badge_html
from lab.ui.compare.link_row import build_link_row
from lab.ui.shell.html_text import esc
from lab.ui.shell.notice import render_notice
from lab.ui.shell.wiring import bind
from lab.ui.compare.render_html import render_columns, render_context, render_f1_gap
from lab.ui.compare.run_picker import build_run_picker, wire_run_picker
from lab.ui.compare.samples_panel import build_samples_panel
from lab.ui.compare.reference_nll import needs_reference_prefill, reference_nll
from lab.ui.compare.inflight import Job, inflight_of
from lab.ui.compare.stored_pair import stored_pair_html
from lab.ui.compare.step_data import StepData, answer_step, engine_view, heat_choices, heatmap_for, step_data
from lab.ui.compare.step_view import READY, EngineView, engine_view_state, f1_gap
from lab.ui.compare.whatif_view import build_whatif_view

# Page script (keyboard shortcuts, lazy prompt-audit requests) and the audit-answer handler.
UI_ASSETS = PROJECT_ROOT / "assets" / "ui"
SHORTCUTS_JS = "<script>\n" + (UI_ASSETS / "compare.js").read_text(encoding="utf-8") + "</script>\n"
# Fills the audit panel the server answered for (JSON [engine, step, state, summary html, body html]).
FILL_AUDIT_JS = (UI_ASSETS / "fill_audit.js").read_text(encoding="utf-8")


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


_WARM_LOCK = threading.Lock()
LIVE_EVERY_S = 1.0  # how often a waiting column's elapsed time and tokens so far are refreshed


def warm_instant_engines(ctx: LabContext, start_key: str | None = None) -> threading.Thread:
    """Precompute, in one background thread, the columns of every stored/reference engine for
    every step (from `start_key` on, wrapping), so that switching steps only renders HTML."""

    def work() -> None:
        if not _WARM_LOCK.acquire(blocking=False):
            return  # a warmer is already running; it re-reads the engine list every step
        try:
            if ctx.pool is not None:
                ctx.pool.wait()
            keys = ctx.step_keys()
            if not keys:
                return
            first = keys.index(start_key) if start_key in keys else 0
            for key in keys[first:] + keys[:first]:
                step = ctx.replay.by_key[key]
                entries = ctx.engine_entries()
                for entry in entries:
                    if entry.answers_from_data and entry.state == "ready" and (entry.name, key) not in ctx.views:
                        answer_step(ctx, entry, step)
                heatmap_for(ctx, step, [engine_view(ctx, e, step, compute_instant=False) for e in entries], None)
        finally:
            _WARM_LOCK.release()

    thread = threading.Thread(target=work, name="lab-warm-columns", daemon=True)
    thread.start()
    return thread


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
            with ctx._store_lock:
                html = step_badges_html(ctx.store, run_id, step_key)
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


def step_outputs(ctx: LabContext, key: str | None, full: bool = False, heat_engine: str | None = None) -> StepOutputs:
    """Everything Compare shows for step `key` (stored and reference engines answer at once)."""
    return outputs_of(ctx, step_data(ctx, step_key_argument(key), heat_engine), full)


def outputs_of(ctx: LabContext, data: StepData, full: bool = False) -> StepOutputs:
    """A step's data as the HTML and choices a step switch sends."""
    step, entries, views = data.step, data.entries, data.views
    return StepOutputs(
        task_id=step.task_id,
        step_choices=step_choices(ctx, step.task_id),
        step_key=step.key,
        context_html=render_context(data.view, full),
        columns_html=step_columns_html(ctx, entries, step, views, full, column_badges(ctx, entries, step.key)),
        f1_html=stored_pair_html(ctx, entries) + render_f1_gap(data.view.f1_gap),  # the verdict above one step
        heat_choices=heat_choices(views),
        heat_engine=data.heat_engine,
        heat_figure=data.heat_figure,
    )


def start_answers(ctx: LabContext, key: str) -> dict[str, Job]:
    """Start every ready engine without an answer to step `key` (cached or being generated); the jobs of
    all of them, those another Generate started included, by engine name."""
    step = ctx.replay.by_key[key]
    inflight = inflight_of(ctx)
    jobs = {}
    for e in ctx.engine_entries():  # the engines and their states as they are now, when Generate is pressed
        if e.state == "ready" and e.engine is not None and (e.name, key) not in ctx.views:
            jobs[e.name] = inflight.start(e.name, key, e.engine, lambda e=e: answer_step(ctx, e, step))
    return jobs


def step_columns(ctx: LabContext, step: Step, answered: dict[str, EngineView] | None = None) -> list[EngineView]:
    """The columns of `step` for the engines of this moment, each from what it is now: its answer (cached, or
    `answered` by jobs this stream awaited: an error too), an answer being generated, or its state (an
    engine that finished loading meanwhile says so, one added meanwhile shows, one removed is gone)."""
    answered = answered or {}
    return [answered.get(e.name) or engine_view(ctx, e, step) for e in ctx.engine_entries()]


def await_jobs(ctx: LabContext, step: Step, jobs: dict[str, Job]) -> Iterator[list[EngineView]]:
    """The columns of `step` as each of `jobs` answers, and every LIVE_EVERY_S meanwhile (seconds and tokens
    so far of the waiting ones, the states of the others)."""
    done: queue.Queue = queue.Queue()
    for job in jobs.values():
        job.when_done(done.put)
    answered: dict[str, EngineView] = {}
    while len(answered) < len(jobs):
        try:
            job = done.get(timeout=LIVE_EVERY_S)
        except queue.Empty:
            yield step_columns(ctx, step, answered)
            continue
        if job.view is not None:
            answered[job.name] = job.view
        else:  # the job ended without a column (it raised past answer_step's own handling)
            answered[job.name] = engine_view_state(job.name, job.name, "error", "the generation ended without an answer")
        yield step_columns(ctx, step, answered)


def generate_views(ctx: LabContext, key: str) -> Iterator[list[EngineView]]:
    """Run every ready engine without an answer concurrently (an answer another Generate is generating is
    awaited, not started again); yield the columns as each answers. Each yield has the engines of that
    moment, each shown as it is then (lab.ui.compare.tab.step_columns)."""
    step = ctx.replay.by_key[key]
    jobs = start_answers(ctx, key)
    yield step_columns(ctx, step)
    answered: dict[str, EngineView] = {}
    for views in await_jobs(ctx, step, jobs):
        answered = {v.name: v for v in views if v.name in jobs}
        yield views
    # Then, with every answer shown and no generation left to slow down, each live model's reference
    # likelihood (one prefill each, one engine at a time): the columns gain it beside their F1.
    entries = {e.name: e for e in ctx.engine_entries()}
    for name in jobs:
        view, e = ctx.views.get((name, key)) or answered.get(name), entries.get(name)
        if e is None or view is None or view.state != READY or view.ref_nll is not None or not needs_reference_prefill(e):
            continue

        def with_nll(view: EngineView = view, e: EngineEntry = e) -> EngineView:
            shown = replace(view, ref_nll=reference_nll(ctx, e, step, view.prompt_text))
            if ctx.views.get((e.name, key)) is not None:
                ctx.views.put((e.name, key), shown)
            return shown

        # a job of its own: two Generates on this step run one prefill, the second awaits it
        job = inflight_of(ctx).start(name, f"reference NLL {key}", e.engine, with_nll)
        job.done.wait()
        answered[name] = job.view or view
        yield step_columns(ctx, step, answered)


def follow_views(ctx: LabContext, key: str) -> Iterator[list[EngineView]]:
    """What a page that did not start them sees of the answers being generated for step `key` (after a
    reload, the tab shown again, the step opened again): the columns until every one of them is in;
    nothing when none is running."""
    if ctx.replay is None or key not in ctx.replay.by_key:
        return
    jobs = {job.name: job for job in inflight_of(ctx).running_on(key)}
    if jobs:
        yield from await_jobs(ctx, ctx.replay.by_key[key], jobs)


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

    def painted(self, request: gr.Request | None, key: str | None) -> None:
        """Note that `request`'s session shows step `key` from now on (a switch's paint as it leaves, or a
        Generate as it begins on the step the browser sent)."""
        if request is not None and request.session_hash:
            self.shown.put(request.session_hash, key)

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
        )


PUBLIC_NO_REPLAY = ("<p>The owner of this Space has not configured the replay file, so Compare has no steps to show; "
                    "you can still browse Results, Triage and the published runs.</p>")


def no_replay_panel(ctx: LabContext) -> str:
    """What Compare shows when no replay data is configured: to a visitor of a public deployment one line
    (the replay is the owner's to configure; no control offered that would be refused), to the owner how
    to configure it."""
    if ctx.settings.public:
        return render_notice("No replay data configured", PUBLIC_NO_REPLAY, "warn")
    url = ctx.settings.replay_url
    problem = f"<p class='lab-muted'>{ctx.replay_error_html}</p>" if ctx.replay_error_html else ""
    return render_notice(
        f"No replay data configured: {LOCAL_REPLAY_HINT}",
        f"{problem}<p>Compare needs the TB2-lite replay steps. Start the lab with "
        "<code>python app.py --replay PATH/replay_full.jsonl</code>, set <code>LAB_REPLAY=PATH</code>, or "
        "download the public replay file (4.7 MB) into the cache with the button below; the lab uses it "
        f"from then on.</p><p class='lab-muted'>source: <code>{esc(url)}</code></p>",
        "warn",
    )


# ---- the handlers: module-level functions of the lab (and the tab), wired by `wire_compare_tab` -----------
def show_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool, heat: str | None,
              request: gr.Request | None = None, heat_now: bool = True) -> tuple:
    """Switch to step `key` (its columns, context, F1 box; the heatmap unless `heat_now` is False)."""
    key = step_key_argument(key)
    if request is not None:
        view.moves.drop(lambda k: k == request.session_hash)
    if ctx.replay is None:
        return tuple(gr.update() for _ in view.switch_outputs)
    out = step_outputs(ctx, key, bool(full), heat)
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
    out = step_outputs(ctx, key, bool(full), heat)
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
    out = step_outputs(ctx, target, bool(full), heat)
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
    views: list[EngineView] = []
    pair_block = stored_pair_html(ctx, ctx.engine_entries())  # stored columns: the run-level verdict stays on top
    for views in generate_views(ctx, key):
        if moved_on(view, request, key):
            continue  # keep generating into the cache, paint nothing
        yield columns_now(views), pair_block + render_f1_gap(f1_gap(views)), gr.update(), gr.update(), gr.update()
    if moved_on(view, request, key):
        return
    fig, spec = heatmap_for(ctx, step_obj, views, heat)
    yield (columns_now(views), pair_block + render_f1_gap(f1_gap(views)),
           gr.update(choices=heat_choices(views), value=spec), fig, gr.update())


def follow_step(ctx: LabContext, view: CompareTab, key: str | None, full: bool,
                request: gr.Request | None = None) -> Iterator[tuple]:
    """The answers to the step shown that are being generated (started by another Generate, another page, a
    page since reloaded): "generating…" with their progress until each is in; nothing when none runs."""
    key = step_key_argument(key)
    painted = False
    if ctx.replay is not None and key in ctx.replay.by_key and inflight_of(ctx).running_on(key):
        columns_now = columns_painter(ctx, ctx.replay.by_key[key], bool(full))
        pair_block = stored_pair_html(ctx, ctx.engine_entries())  # as a Generate paints the F1 box
        for views in follow_views(ctx, key):
            if moved_on(view, request, key):
                break
            painted = True
            yield columns_now(views), pair_block + render_f1_gap(f1_gap(views))
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


# ---- the layout and its wiring ---------------------------------------------------------------------------
@dataclass
class CompareLayout:
    """The Compare tab's components its events use (beyond CompareTab's)."""

    notice: gr.HTML
    download: gr.Button
    prev: gr.Button
    next: gr.Button
    generate: gr.Button
    columns_html: gr.HTML
    f1_html: gr.HTML
    heat_plot: gr.Plot
    whatif: Any
    audit_request: gr.Textbox
    audit_go: gr.Button
    audit_answer: gr.Textbox
    picker: Any


def build_compare_tab(ctx: LabContext) -> CompareTab:
    """Lay out the Compare tab and wire its events."""
    with gr.Tab("Compare", id="compare") as tab:
        notice = gr.HTML(no_replay_panel(ctx) if ctx.replay is None else "", visible=ctx.replay is None)
        # not offered to a visitor of a public deployment (it would be refused: the replay is the owner's)
        download = gr.Button("Download the public replay file", visible=ctx.replay is None and not ctx.settings.public,
                             variant="primary", elem_id="lab-download-replay")
        with gr.Row(equal_height=True, elem_classes=["lab-nav"]):
            first = ctx.replay.steps[0] if ctx.replay and ctx.replay.steps else None
            task = gr.Dropdown(task_choices(ctx), value=first.task_id if first else None, label="task", scale=3,
                               elem_id="lab-task", allow_custom_value=True)
            step = gr.Dropdown(step_choices(ctx, first.task_id) if first else [], value=first.key if first else None,
                               label="step", scale=2, elem_id="lab-step", allow_custom_value=True)
            prev = gr.Button("◀ prev (k)", elem_id="lab-prev", scale=0, min_width=110)
            nxt = gr.Button("next (j) ▶", elem_id="lab-next", scale=0, min_width=110)
            generate = gr.Button("Generate on all engines", variant="primary", elem_id="lab-generate", scale=1)
            show_all = gr.Checkbox(False, label="show all (no clipping)", scale=1, elem_id="lab-show-all")
        link, link_note = build_link_row()
        picker = build_run_picker(ctx)
        context_html = gr.HTML(elem_id="lab-context")
        gr.Markdown("### Engines", elem_classes=["lab-h"])
        columns_html = gr.HTML(elem_id="lab-columns")
        build_samples_panel(ctx, step)  # N answers per engine: F1 strip, collapsed answers (lab.ui.compare.samples_panel)
        with gr.Row():
            with gr.Column(scale=1, min_width=280):
                gr.Markdown("### Command F1 by engine", elem_classes=["lab-h"])
                f1_html = gr.HTML(elem_id="lab-f1")
            with gr.Column(scale=2):
                heat_engine = gr.Dropdown([], label="heatmap engine", elem_id="lab-heat-engine",
                                          allow_custom_value=True)
                heat_plot = gr.Plot(label="similarity heatmap", elem_id="lab-heatmap")
        whatif = build_whatif_view(ctx, step, show_all)
        # the prompt audit panels ask for their content through these (see SHORTCUTS_JS)
        audit_request = gr.Textbox(visible="hidden", elem_id="lab-audit-request")
        audit_go = gr.Button(visible="hidden", elem_id="lab-audit-go")
        audit_answer_box = gr.Textbox(visible="hidden", elem_id="lab-audit-answer")

    outputs = [task, step, context_html, columns_html, f1_html, heat_engine, heat_plot]
    view = CompareTab(tab, task, step, show_all, heat_engine, outputs, warm=lambda: warm_instant_engines(ctx),
                      link=link, link_note=link_note)
    layout = CompareLayout(notice, download, prev, nxt, generate, columns_html, f1_html, heat_plot, whatif,
                           audit_request, audit_go, audit_answer_box, picker)
    wire_compare_tab(ctx, view, layout)
    return view


def wire_compare_tab(ctx: LabContext, view: CompareTab, ui: CompareLayout) -> None:
    """Wire the Compare tab's events to the handlers above."""
    wire_run_picker(ctx, ui.picker, view.switch_outputs, lambda key: view.updates(step_outputs(ctx, key)), view.step,
                    view.tab)
    outputs, inputs = view.switch_outputs, [view.step, view.show_all, view.heat_engine]
    # A Generate still streaming must not paint its step over the one the user moved to: every move
    # cancels it (its engines' answers still land in the cache and show when that step is opened again).
    # "multiple": a press while an earlier Generate still streams (a slow engine) is not dropped: it reads the
    # engines' states then and starts those ready since, awaiting the answers the first one started.
    generating = ui.generate.click(
        bind(generate_step, ctx, view), inputs,
        [ui.columns_html, ui.f1_html, view.heat_engine, ui.heat_plot, ui.notice],
        show_progress="minimal", api_name="generate", trigger_mode="multiple",
    )
    fast = {"outputs": outputs, "show_progress": "hidden", "cancels": [generating]}
    switches = [
        view.task.input(bind(show_task_fast, ctx, view), [view.task, view.show_all, view.heat_engine],
                        api_visibility="private", **fast),
        view.step.input(bind(show_step_fast, ctx, view), inputs, api_name="show_step", **fast),
        # "multiple": a second press while the first is pending is queued, not dropped (see CompareTab.moves)
        ui.prev.click(bind(move_step, ctx, view, -1), inputs, api_name="prev_step", trigger_mode="multiple", **fast),
        ui.next.click(bind(move_step, ctx, view, +1), inputs, api_name="next_step", trigger_mode="multiple", **fast),
    ]
    refresh = bind(refresh_step, ctx, view)
    view.show_all.change(refresh, inputs, outputs, show_progress="hidden", api_visibility="private")
    heat = bind(draw_heat, ctx)
    for switched in switches:  # the heatmap follows each fast switch once its columns are painted;
        # "always_last": a switch that ends while the previous heatmap is still drawing is drawn after it
        switched.then(heat, [view.step, view.heat_engine], ui.heat_plot, show_progress="hidden",
                      api_visibility="private", trigger_mode="always_last")
    view.heat_engine.input(heat, [view.step, view.heat_engine], ui.heat_plot, show_progress="hidden",
                           api_visibility="private")
    # answers being generated for the step shown (another page's Generate, one from before a reload) show as
    # in progress and then as answered: after a switch, when the tab is shown, when the page loads
    follow = {"fn": bind(follow_step, ctx, view), "inputs": [view.step, view.show_all],
              "outputs": [ui.columns_html, ui.f1_html], "show_progress": "hidden", "api_visibility": "private"}
    for switched in switches:
        switched.then(trigger_mode="always_last", **follow)
    view.tab.select(refresh, inputs, outputs, show_progress="hidden", api_visibility="private").then(**follow)
    gr.on(triggers=None, **follow)
    ui.whatif.ran.then(refresh, inputs, outputs, show_progress="hidden", api_visibility="private")  # its originals
    view.replay_loaded = ui.download.click(bind(download_replay, ctx, view), None, [ui.notice, ui.download, *outputs],
                                           api_visibility="private")
    gr.on(triggers=None, fn=bind(page_loaded, ctx), outputs=[ui.notice, ui.download, view.task],
          api_visibility="private", show_progress="hidden")
    ui.audit_go.click(bind(audit_reply, ctx), ui.audit_request, ui.audit_answer, show_progress="hidden",
                      api_name="prompt_audit", trigger_mode="multiple").then(
        None, ui.audit_answer, None, js=FILL_AUDIT_JS, show_progress="hidden", api_visibility="private")
