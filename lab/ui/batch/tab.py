"""The Batch tab: replay all or a filtered part of the steps on chosen engines, with progress."""
from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.data.step import Step
from lab.errors import LabError
from lab.runs.names import finished_run_file, safe_run_name
from lab.runs.options import ReplaySource, RunOptions, replay_config
from lab.runs.replay import ReplayConfig
from lab.store.autoimport import stored_run_names
from lab.runs.reference_run import SUFFIX as REFERENCE_SUFFIX
from lab.tb2lite import CORRECTED
from lab.runs.meter import ReplayMeter, ticking
from lab.ui.batch.rows import (ANSWERS, BATCH_CHUNK, BUCKETS, LIVE_EVERY_S, REFERENCE, WHAT, BatchRow, filter_steps,
                               render_aggregate)
from lab.workspace import EngineEntry, LabContext
from lab.ui.batch.live import live_updates
from lab.ui.shell.html_text import esc
from lab.ui.shell.public import BATCH_OFF, batch_allowed, sweep_allowed
from lab.ui.shell.session import current_session
from lab.ui.shell.wiring import bind
from lab.ui.shell.links import wire_tab_link
from lab.visitors import SessionEvents
from lab.ui.batch.race_panel import build_race_controls
from lab.ui.batch.sweep_panel import SLOT, build_sweep_panel


def run_batch(
    ctx: LabContext,
    names: Sequence[str],
    steps: list[Step],
    *,
    resume: bool = True,
    new_run: bool = False,
    run_name: str | None = None,
    stop: threading.Event | None = None,
    on_update: Callable[[list[BatchRow]], None] | None = None,
    chunk_size: int = BATCH_CHUNK,
    what: str = ANSWERS,
) -> list[BatchRow]:
    """Replay `steps` on each named ready engine in turn; write results/runs/<name>.json, import it
    into the store. An engine's failure is recorded in its row; the next engine still runs.
    A finished run is never regenerated in place: its row says so, unless `new_run` asks for a fresh name.
    `what`: ANSWERS (a replay) or REFERENCE (`score-reference`: the reference answer's likelihood per
    step, results/runs/<name>.reference.json, no generation)."""
    entries = {e.name: e for e in ctx.engine_entries()}
    rows = [BatchRow(name, 0, len(steps)) for name in names]
    reporting = threading.Lock()  # the replay's thread and its meter's redraw report in turn, each the latest

    def update() -> None:
        if on_update is not None:
            with reporting:
                on_update([replace(r) for r in rows])

    update()
    for row in rows:
        if stop is not None and stop.is_set():
            row.state = "stopped"
            continue
        entry = entries.get(row.name)
        problem = engine_problem(ctx, entry, what)
        if problem is not None:
            row.state = f"failed: {problem}"
        else:
            run_row(ctx, row, entry, steps, update, stop=stop, resume=resume, new_run=new_run,
                    run_name=run_name if len(rows) == 1 else None, chunk_size=chunk_size, what=what)
        update()
    return rows


def engine_problem(ctx: LabContext, entry: EngineEntry | None, what: str) -> str | None:
    """Why Batch cannot run `what` on this engine, or None."""
    if entry is None or entry.engine is None:
        return "not loaded (add it in the Engines tab)" if entry is None else (entry.error or
                                                                              f"engine is {entry.state}")
    from lab.runs.legacy_guard import legacy_run_problem

    problem = legacy_run_problem(entry.engine, ctx.replay.mode, CORRECTED)
    if problem is not None:  # Batch replays the loaded replay with the corrected scorer
        return f"{problem} (python -m lab replay)"
    if what == REFERENCE and not entry.engine.scores_reference:
        return (f"a {entry.kind} engine cannot score the reference (it has no model); "
                "use transformers:, vllm:, or openai: on a vLLM server")
    return None


def run_row(ctx: LabContext, row: BatchRow, entry: EngineEntry, steps: list[Step], update: Callable[[], None], *,
            stop: threading.Event | None, resume: bool, new_run: bool, run_name: str | None, chunk_size: int,
            what: str) -> None:
    """One engine's run of the batch: named, run (or resumed), imported; the outcome in `row.state`."""
    from lab.runs.replay import replay as replay_run

    out_dir = Path(ctx.settings.runs_dir)
    suffix = REFERENCE_SUFFIX if what == REFERENCE else ""
    try:
        stem = safe_run_name(entry.engine, out_dir, run_name)
        finished = finished_run_file(out_dir, stem + suffix)
    except LabError as exc:  # a run name too long for a file name: one line, the next engine still runs
        row.state = f"failed: {exc}"
        return
    except OSError as exc:
        row.state = f"failed: cannot read the runs folder: {exc.strerror or type(exc).__name__}"
        return
    if finished is not None and not new_run:
        row.state = (f"already complete: {finished.name} holds a finished run (kept); tick "
                     "'start a new run' to run it again under a new name")
        row.path = str(finished)
        return
    notes: list[str] = []  # a name taken meanwhile (by another process): the run gets NAME-2 …
    taken = stored_run_names(ctx.store) if ctx.store is not None else None
    fresh = finished is not None  # 'start a new run': lab.runs.claims gives it the next free name
    options = RunOptions(resume=resume and not fresh, chunk_size=chunk_size)
    # Batch's filter (tasks, buckets, groups) is no selection a result file can state: it records none
    config = replay_config(options, entry.engine, ReplaySource.of(ctx.replay), out_dir, run_name=stem, selection={},
                           taken=taken, notify=notes.append)
    row.state = "running"
    update()
    meter = ReplayMeter()

    def progress(done: int, total: int, agg: dict | None) -> None:
        row.done, row.total = done, total
        row.aggregate = agg or row.aggregate  # the live aggregate comes with some calls only
        row.live = meter.figures()
        update()

    def tick() -> None:  # between finished steps: the tokens so far and the time left
        row.live = meter.figures()
        update()

    try:
        if what == REFERENCE:
            path = _score_reference(ctx, entry, steps, config, row, update, stop)
        else:
            with ticking(tick, LIVE_EVERY_S):
                path = replay_run(entry.engine, steps, config, progress=progress, stop=stop, meter=meter)
    except InterruptedError:
        row.state = "stopped (run again with 'resume' to continue)"
        return
    except LabError as exc:
        row.state = f"failed: {exc}"
        return
    except Exception as exc:  # noqa: BLE001 - one engine's crash is reported, the others go on
        row.state = f"failed: {type(exc).__name__}: {exc}"
        return
    row.path = str(path)
    try:
        row.run_id = ctx.import_run(path)
        row.state = f"done · saved {path.name} · run {row.run_id}" + "".join(f" · {n}" for n in notes)
    except LabError as exc:
        row.state = f"done · {exc}"


def _score_reference(ctx: LabContext, entry: EngineEntry, steps: list[Step], replayed: ReplayConfig,
                     row: BatchRow, update: Callable[[], None], stop: threading.Event | None) -> Path:
    """One engine's score-reference run (lab.runs.reference_run), named and resumed as the replay would be;
    its row's aggregate is the NLL so far."""
    from lab.runs.reference_run import ReferenceConfig, score_reference_run

    config = ReferenceConfig(out_dir=Path(ctx.settings.runs_dir), run_name=replayed.run_name,
                             resume=replayed.resume, taken=replayed.taken, notify=replayed.notify,
                             replay_fingerprint=ctx.replay.fingerprint, eval_path=str(ctx.replay.path))

    def progress(done: int, total: int) -> None:
        row.done, row.total = done, total
        update()

    try:
        path = score_reference_run(entry.engine, steps, config, progress=progress, stop=stop)
    except LabError as exc:
        if stop is not None and stop.is_set() and str(exc).startswith("stopped"):
            raise InterruptedError(str(exc)) from None
        raise
    row.aggregate = {**json.loads(path.read_text(encoding="utf-8")).get("aggregate", {}), "kind": REFERENCE}
    return path


STOPPING = "stopping (requests in flight cancelled; finished steps kept)"


def _stopping(rows: list[BatchRow]) -> list[BatchRow]:
    return [replace(r, state=STOPPING) if r.state == "running" else r for r in rows]


def batch_updates(
    ctx: LabContext, names: Sequence[str], steps: list[Step], stop: threading.Event, **options
) -> Iterator[list[BatchRow]]:
    """Run `run_batch` in a worker thread and yield each snapshot of the rows as it comes."""
    def work(report) -> None:
        run_batch(ctx, names, steps, stop=stop, on_update=report, **options)

    return live_updates(work, stop, _stopping)


def selection_count(ctx: LabContext, task_sel, bucket_sel, group_sel) -> str:
    """How many replay steps the task, bucket and group choices select."""
    n = len(filter_steps(ctx.replay.steps, task_sel, bucket_sel, group_sel)) if ctx.replay else 0
    return f'<div class="lab-muted">{n} of {len(ctx.replay.steps) if ctx.replay else 0} steps selected</div>'


def refresh_batch(ctx: LabContext, current, task_sel, bucket_sel, group_sel) -> tuple:
    """Engines ready now, and the replay's tasks and groups (a replay downloaded in the app fills them)."""
    names = [e.name for e in ctx.engine_entries() if e.state == "ready"]
    kept = [n for n in (current or []) if n in names]
    rp = ctx.replay
    # `current` is the ticks when the tab was opened: sent back unchanged, it would untick an engine ticked while
    # this answer was on its way (a slow Space); only a tick of an engine no longer ready is taken away
    engines = gr.update(choices=names) if kept == list(current or []) else gr.update(choices=names, value=kept)
    return (engines,
            gr.update(choices=rp.tasks if rp else []),
            gr.update(choices=sorted({s.source_group for s in rp.steps}) if rp else []),
            gr.update(visible=rp is None),
            selection_count(ctx, task_sel, bucket_sel, group_sel))


def start_batch(ctx: LabContext, stops: SessionEvents, names, task_sel, bucket_sel, group_sel, do_resume, name,
                fresh=False, run_what=ANSWERS) -> Iterator[str]:
    """Run batch: the table of each engine's progress as it changes (the session's Stop stops it)."""
    if not batch_allowed(ctx.settings):
        gr.Warning(BATCH_OFF)
        return
    if ctx.replay is None:
        gr.Warning(f"No replay data loaded: {LOCAL_REPLAY_HINT}.")
        return
    stop_event = stops.get(current_session())
    steps = filter_steps(ctx.replay.steps, task_sel, bucket_sel, group_sel)
    if not names:
        gr.Warning("Choose at least one ready engine (add engines in the Engines tab).")
        return
    if not steps:
        gr.Warning("No step matches this filter: clear a task, bucket or group choice.")
        return
    stop_event.clear()
    rows: list[BatchRow] = []
    # progress lives in the table (each engine's steps, and an overall row), not in Gradio's bar over it
    for rows in batch_updates(ctx, names, steps, stop_event, resume=bool(do_resume),
                              new_run=bool(fresh), run_name=name or None,
                              what=REFERENCE if run_what == REFERENCE else ANSWERS):
        yield render_aggregate(rows, overall=True)
    for r in rows:
        if r.state.startswith("failed"):
            gr.Warning(f"{r.name}: {r.state}")
    yield render_aggregate(rows, overall=True)


def request_stop(ctx: LabContext, stops: SessionEvents) -> None:
    """Stop: the session's batch (and, in the owner's lab, its cluster sweep)."""
    stops.get(current_session()).set()
    if sweep_allowed(ctx.settings):  # the owner's lab: Stop in any tab stops its cluster sweep
        SLOT.request_stop()
    gr.Info("Stopping: requests in flight are cancelled; finished steps are kept for resume.")


def build_batch_tab(ctx: LabContext) -> None:
    """Lay out the Batch tab and wire its events."""
    replay = ctx.replay
    with gr.Tab("Batch", id="batch") as tab:
        wire_tab_link(tab, "batch", "lab-batch-link")  # its "copy link" box, followed by the address bar
        if not batch_allowed(ctx.settings):
            gr.HTML(f'<div class="lab-empty">{esc(BATCH_OFF)}</div>')
        no_replay = gr.HTML('<div class="lab-empty">Batch needs replay data: start with <code>--replay PATH</code> '
                            "or download it in Compare.</div>", visible=replay is None, elem_id="lab-batch-no-replay")
        engines = gr.CheckboxGroup([e.name for e in ctx.engine_entries() if e.state == "ready"],
                                   label="engines (ready ones; add more in the Engines tab)",
                                   elem_id="lab-batch-engines")
        with gr.Row():
            tasks = gr.Dropdown(replay.tasks if replay else [], multiselect=True, label="tasks (none: all)",
                                elem_id="lab-batch-tasks")
            buckets = gr.CheckboxGroup(list(BUCKETS), label="buckets (none: all)")
            groups = gr.CheckboxGroup(sorted({s.source_group for s in replay.steps}) if replay else [],
                                      label="source groups (none: all)")
        selected = gr.HTML(elem_id="lab-batch-selected")
        what = gr.Radio(list(WHAT), value=ANSWERS, label="run", elem_id="lab-batch-what",
                        info="answers: each engine replays the steps and is scored; reference likelihood: each "
                             "model's log-probability of the recorded replies (one prefill a step, no generation)")
        with gr.Row(equal_height=True):
            resume = gr.Checkbox(True, label="resume an interrupted run (keeps finished steps)")
            new_run = gr.Checkbox(False, label="start a new run (a finished run of that name is kept)",
                                  elem_id="lab-batch-new-run")
            run_name = gr.Textbox(label="run name (optional; one engine only; default: engine name)", scale=2)
            start = gr.Button("Run batch", variant="primary", elem_id="lab-batch-run")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="lab-batch-stop")
        stops = SessionEvents()  # each session's Stop stops only that session's batch
        sweep_inputs = {"engines": engines, "tasks": tasks, "buckets": buckets, "groups": groups, "resume": resume,
                        "new_run": new_run, "run_name": run_name, "what": what}
        live = gr.HTML(render_aggregate([]), elem_id="lab-batch-live", render=False)
        build_sweep_panel(ctx, stops, sweep_inputs, live,  # the cluster's controls (the race's too), above the table
                          lambda patterns, samples: build_race_controls(ctx, stops, sweep_inputs, live, patterns, samples))
        live.render()

    filters = [tasks, buckets, groups]
    for comp in filters:
        comp.change(bind(selection_count, ctx), filters, selected, api_visibility="private", show_progress="hidden")
    tab.select(bind(refresh_batch, ctx), [engines, *filters], [engines, tasks, groups, no_replay, selected],
               api_visibility="private", show_progress="hidden")
    start.click(bind(start_batch, ctx, stops), [engines, tasks, buckets, groups, resume, run_name, new_run, what], live,
                api_name="run_batch", concurrency_limit=1, show_progress="hidden")
    stop_btn.click(bind(request_stop, ctx, stops), None, None, api_name="stop_batch")
