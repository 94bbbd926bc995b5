"""The Batch tab: replay all or a filtered part of the steps on chosen engines, with progress."""
from __future__ import annotations

import queue
import threading
from pathlib import Path

import gradio as gr

from lab.data.step import Step
from lab.errors import LabError
from lab.ui.context import LabContext
from lab.ui.render_html import esc

BUCKETS = ("early", "mid", "late")


def filter_steps(steps: list[Step], tasks: list[str] | None, buckets: list[str] | None,
                 groups: list[str] | None) -> list[Step]:
    """Steps whose task, bucket and source group are among the chosen ones (empty choice = all)."""
    return [
        s for s in steps
        if (not tasks or s.task_id in tasks) and (not buckets or s.bucket in buckets)
        and (not groups or s.source_group in groups)
    ]


def render_aggregate(rows: list[tuple[str, int, int, dict | None, str]]) -> str:
    """Live aggregate per engine: steps done / total, F1, first exact, valid JSON, status."""
    if not rows:
        return '<div class="lab-muted">no run yet</div>'
    body = []
    for name, done, total, agg, state in rows:
        agg = agg or {}
        f1 = agg.get("avg_command_f1")
        body.append(
            f"<tr><td><b>{esc(name)}</b></td><td>{done}/{total}</td>"
            f"<td>{'–' if f1 is None else f'{100 * f1:.2f}'}</td>"
            f"<td>{esc(agg.get('first_cmd_exact_pct', '–'))}</td><td>{esc(agg.get('valid_json_pct', '–'))}</td>"
            f"<td>{esc(state)}</td></tr>"
        )
    head = "<tr><th>engine</th><th>steps</th><th>score</th><th>first exact %</th><th>valid JSON %</th><th>status</th></tr>"
    return f'<table class="lab-engines">{head}{"".join(body)}</table>'


def build_batch_tab(ctx: LabContext) -> None:
    """Lay out the Batch tab and wire its events."""
    replay = ctx.replay
    with gr.Tab("Batch", id="batch") as tab:
        if replay is None:
            gr.HTML('<div class="lab-empty">Batch needs replay data: start with <code>--replay PATH</code> '
                    "or download it in Compare.</div>")
        engines = gr.CheckboxGroup([], label="engines", elem_id="lab-batch-engines")
        with gr.Row():
            tasks = gr.Dropdown(replay.tasks if replay else [], multiselect=True, label="tasks (empty: all)")
            buckets = gr.CheckboxGroup(list(BUCKETS), label="buckets (none: all)")
            groups = gr.CheckboxGroup(sorted({s.source_group for s in replay.steps}) if replay else [],
                                      label="source groups (none: all)")
        with gr.Row():
            resume = gr.Checkbox(True, label="resume an interrupted run (keeps finished steps)")
            run_name = gr.Textbox(label="run name (optional; default: engine name)", scale=2)
            start = gr.Button("Run batch", variant="primary", elem_id="lab-batch-run")
            stop_btn = gr.Button("Stop", variant="stop")
        live = gr.HTML(render_aggregate([]), elem_id="lab-batch-live")
    stop_event = threading.Event()

    def refresh_engines():
        return gr.update(choices=[e.name for e in ctx.engine_entries() if e.state == "ready"])

    def run(specs, task_sel, bucket_sel, group_sel, do_resume, name, progress=gr.Progress()):
        from lab.runs.replay import ReplayConfig, replay as replay_run
        from lab.store.importer import import_file

        if ctx.replay is None:
            gr.Warning("No replay data loaded: start the lab with --replay PATH.")
            return
        steps = filter_steps(ctx.replay.steps, task_sel, bucket_sel, group_sel)
        if not steps or not specs:
            gr.Warning("Choose at least one ready engine and a filter that keeps some steps.")
            return
        entries = {e.name: e for e in ctx.engine_entries()}
        stop_event.clear()
        rows = {spec: [entries[spec].name if spec in entries else spec, 0, len(steps), None, "waiting"] for spec in specs}
        yield render_aggregate([tuple(r) for r in rows.values()])
        for spec in specs:
            entry = entries.get(spec)
            if entry is None or entry.engine is None:
                rows[spec][4] = "not ready"
                continue
            events: queue.Queue = queue.Queue()
            config = ReplayConfig(out_dir=Path(ctx.settings.runs_dir), eval_path=ctx.replay.path,
                                  resume=bool(do_resume), run_name=(name or None) if len(specs) == 1 else None)

            def work(engine=entry.engine, config=config):
                try:
                    path = replay_run(engine, steps, config,
                                      progress=lambda d, t, agg: events.put(("progress", d, t, agg)),
                                      stop=stop_event)
                    events.put(("done", path))
                except InterruptedError as exc:
                    events.put(("error", f"stopped: {exc}"))
                except LabError as exc:
                    events.put(("error", str(exc)))
                except Exception as exc:  # noqa: BLE001 - one engine's crash is reported, others go on
                    events.put(("error", f"{type(exc).__name__}: {exc}"))

            threading.Thread(target=work, daemon=True).start()
            rows[spec][4] = "running"
            while True:
                event = events.get()
                if event[0] == "progress":
                    _, done, total, agg = event
                    rows[spec][1:4] = [done, total, agg]
                    progress(done / max(total, 1), desc=f"{rows[spec][0]}: {done}/{total} steps")
                    yield render_aggregate([tuple(r) for r in rows.values()])
                    continue
                if event[0] == "done":
                    path = event[1]
                    try:
                        with ctx._store_lock:
                            if ctx.store is not None:
                                import_file(ctx.store, path)
                        rows[spec][4] = f"saved {path}"
                    except LabError as exc:
                        rows[spec][4] = f"saved {path}; import failed: {exc}"
                else:
                    rows[spec][4] = event[1]
                    gr.Warning(f"{rows[spec][0]}: {event[1]}")
                break
            yield render_aggregate([tuple(r) for r in rows.values()])

    tab.select(refresh_engines, None, engines, api_visibility="private", show_progress="hidden")
    start.click(run, [engines, tasks, buckets, groups, resume, run_name], live, api_name="run_batch",
                concurrency_limit=1)
    stop_btn.click(lambda: stop_event.set(), None, None, api_visibility="private")
