"""The Batch tab's cluster sweep: the chosen engines (and SPEC patterns) go to the Ray cluster at
LAB_RAY_ADDRESS with the sweep CLI's options. The app process is the sweep's driver (lab.sweep.plan):
it receives finished steps, writes the files into its runs folder and imports them into the store.
The table is one more view of the sweep's progress callback; Stop kills the actors and keeps every
step received (a later run with resume continues)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

import gradio as gr

from lab.data.sources import LOCAL_REPLAY_HINT
from lab.errors import LabError
from lab.runs.claims import next_free_stem
from lab.runs.names import finished_run_file, safe_run_name
from lab.runs.options import ReplaySource, RunOptions
from lab.sweep import progress as sweep_states
from lab.sweep.options import ANSWERS as RUN_ANSWERS, REFERENCE as RUN_REFERENCE  # what the sweep runs
from lab.sweep.plan import Cluster, Outcome, Sweep
from lab.sweep.progress import JobProgress
from lab.ui.batch.rows import ANSWERS, BATCH_CHUNK, REFERENCE, BatchRow, filter_steps
from lab.workspace import LabContext
from lab.ui.batch.live import live_updates
from lab.ui.shell.public import SWEEP_OFF, sweep_allowed
from lab.ui.shell.html_text import esc
from lab.ui.shell.session import current_session
from lab.visitors import SessionEvents
from lab.ui.batch.sweep_view import SHOWN_STATES, STOPPING, SweepView, cluster_line, engine_rows, render_view

MAX_SHARDS = 64
CHUNK = BATCH_CHUNK  # steps per generate call on a node, as Batch's: how often finished steps come back
NO_CLUSTER = "No Ray cluster configured: start the lab with LAB_RAY_ADDRESS=HEAD:6379 (or python app.py --ray HEAD:6379)."
BUSY = "A cluster sweep is already running in this lab: wait for it to finish, or press Stop."


class SweepSlot:
    """One sweep at a time per app (Ray's connection is the process's); its Stop reachable from any tab."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.stop: threading.Event | None = None

    def take(self, stop: threading.Event) -> bool:
        with self._lock:
            if self.stop is not None:
                return False
            self.stop = stop
            return True

    def free(self) -> None:
        with self._lock:
            self.stop = None

    def hold(self, stop: threading.Event, report: Callable, busy: object, drive: Callable) -> None:
        """Run `drive(report)` holding the slot (its Stop is `stop`); `report(busy)` when another holds it."""
        if not self.take(stop):
            report(busy)
            return
        try:
            stop.clear()
            drive(report)
        finally:
            self.free()

    def request_stop(self) -> None:
        with self._lock:
            if self.stop is not None:
                self.stop.set()


SLOT = SweepSlot()
T = TypeVar("T")
V = TypeVar("V", bound="SweepView")


def _whole(value: object, what: str, high: int) -> int:
    """A whole number from 1 to `high` typed into a box, or one line saying what is wrong."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not number.is_integer() or not 1 <= number <= high:
        raise LabError(f"{what}: give a whole number from 1 to {high} (got {str(value)[:40]!r})")
    return int(number)


def chosen_specs(ctx: LabContext, names: Sequence[str] | None, patterns: str | None) -> list[str]:
    """The SPECs of the chosen pool engines, then every SPEC the patterns box expands to (as the CLI's
    --engine does: ranges, globs, @FILE), each once."""
    from lab.sweep.specs import expand_specs

    entries = {e.name: e for e in ctx.engine_entries()}
    specs = []
    for name in names or []:
        if name not in entries:
            raise LabError(f"engine '{name}' is not loaded (add it in the Engines tab)")
        specs.append(entries[name].spec)
    lines = [ln.strip() for ln in str(patterns or "").splitlines()]
    specs += [ln for ln in lines if ln and not ln.startswith("#")]
    return list(dict.fromkeys(expand_specs(specs)))


def run_names(specs: list[str], out_dir: Path, wanted: str | None, fresh: bool,
              suffix: str = "") -> tuple[list[str], dict[str, BatchRow]]:
    """Batch's naming rules for each SPEC: the run's file stem, never a `stored:` engine's own input; a
    finished run (`STEM{suffix}.json`: `.reference` for a score-reference run) is kept (its row says so)
    unless `fresh` asks for a new name."""
    from lab.engines import create_engine

    stems, finished = [], {}
    for spec in specs:
        stem = safe_run_name(create_engine(spec), out_dir, wanted if len(specs) == 1 else None)
        done = finished_run_file(out_dir, stem + suffix)
        if done is not None and not fresh:
            finished[spec] = BatchRow(stem, 0, 0, state=f"already complete: {done.name} holds a finished run (kept); "
                                      "tick 'start a new run' to run it again under a new name", path=str(done), node="")
        stems.append(next_free_stem(out_dir, stem, suffix) if done is not None else stem)
    twice = sorted({s for s in stems if stems.count(s) > 1})
    if twice:
        raise LabError(f"several engines would write {', '.join(f'{s}{suffix}.json' for s in twice)}: give each its "
                       "own name (name=… in its SPEC)")
    return stems, finished


@dataclass
class SweepChoice:
    """What the tab's choices ask for: the sweep, and every chosen SPEC with its run name (finished
    runs are kept and left out of the sweep)."""

    sweep: Sweep
    specs: list[str]
    stems: list[str]
    finished: dict[str, BatchRow]


def plan_sweep(ctx: LabContext, names: Sequence[str] | None, patterns: str | None, task_sel: list[str] | None,
               bucket_sel: list[str] | None, group_sel: list[str] | None, shards: object, samples: object,
               fresh: bool, run_name: str | None, what: str = ANSWERS) -> SweepChoice:
    """The sweep the tab's choices ask for (`what`: each engine's answers, or its likelihood of the reference
    answers), with the CLI's options at their defaults otherwise; LabError (one line) for a choice that cannot run."""
    from lab.runs.reference_run import SUFFIX
    from lab.runs.samples_cli import MAX_SAMPLES

    if ctx.replay is None:
        raise LabError(f"No replay data loaded: {LOCAL_REPLAY_HINT}.")
    steps = filter_steps(ctx.replay.steps, task_sel, bucket_sel, group_sel)
    if not steps:
        raise LabError("No step matches this filter: clear a task, bucket or group choice.")
    shards, samples = _whole(shards, "shards", MAX_SHARDS), _whole(samples, "samples", MAX_SAMPLES)
    reference = what == REFERENCE
    if reference and samples > 1:
        raise LabError(f"samples per step {samples}: the reference likelihood is scored once per step (no sampling); "
                       "set samples to 1")
    specs = chosen_specs(ctx, names, patterns)
    if not specs:
        raise LabError("Choose at least one engine, or type a SPEC or pattern for the cluster.")
    out_dir = Path(ctx.settings.runs_dir)
    stems, finished = run_names(specs, out_dir, (run_name or "").strip() or None, fresh, SUFFIX if reference else "")
    todo = [(s, n) for s, n in zip(specs, stems) if s not in finished]
    options = RunOptions(mode=ctx.replay.mode, tasks=tuple(task_sel or ()) or None, samples=samples, chunk_size=CHUNK)
    sweep = Sweep([s for s, _ in todo], steps, options, ReplaySource.of(ctx.replay), out_dir, shards,
                  [n for _, n in todo], RUN_REFERENCE if reference else RUN_ANSWERS)
    return SweepChoice(sweep, specs, stems, finished)


def outcome_row(ctx: LabContext, row: BatchRow, outcome: Outcome, reference: bool = False) -> BatchRow:
    """An engine's last row: failed, stopped, or done with its file imported into the store here (`reference`:
    a score-reference run, whose row shows its NLL per token)."""
    if outcome.error:
        return replace(row, state=f"failed: {outcome.error}")
    if outcome.stopped:
        return replace(row, state=SHOWN_STATES[sweep_states.STOPPED])
    aggregate = {**(outcome.aggregate or {}), "kind": REFERENCE} if reference else outcome.aggregate
    row = replace(row, path=str(outcome.path), aggregate=aggregate, done=row.total)
    try:
        row.run_id = ctx.import_run(outcome.path)
        row.state = f"done · saved {outcome.path.name} · run {row.run_id}"
    except LabError as exc:
        row.state = f"done · {exc}"
    return row


def sweep_updates(ctx: LabContext, choice: SweepChoice, resume: bool, stop: threading.Event) -> Iterator[SweepView]:
    """Drive the sweep in a thread (lab.sweep.plan.execute; one at a time per app) and yield the view
    after every change."""
    from lab.sweep.connect import sweep_address
    from lab.sweep.plan import execute

    address = sweep_address(ctx.settings.ray_address)
    sweep, specs, stems, finished = choice.sweep, choice.specs, choice.stems, choice.finished

    def work(report) -> None:
        SLOT.hold(stop, report, SweepView("", error=BUSY), drive)

    def drive(report) -> None:
        view = SweepView(f"connecting to the Ray cluster at <code>{esc(address)}</code> …")
        view.rows = engine_rows([JobProgress(s, s, 0, len(sweep.steps)) for s in sweep.specs], specs, stems, finished)
        report(replace(view))
        if not sweep.specs:
            view.cluster = "nothing to run on the cluster: every chosen engine already has a finished run"
            report(view)
            return

        def connected(cluster: Cluster) -> None:
            view.cluster = cluster_line(cluster)
            report(replace(view))

        def progress(snapshots: list[JobProgress]) -> None:
            view.rows = engine_rows(snapshots, specs, stems, finished)
            report(replace(view))

        try:
            _, outcomes = execute(sweep, address, resume, progress=progress, stop=stop, connected=connected)
        except LabError as exc:
            view.error = str(exc)
            view.rows = [replace(r, state="not started") if r.state == SHOWN_STATES[sweep_states.WAITING] else r
                         for r in view.rows]
            report(view)
            return
        by_spec = {o.spec: o for o in outcomes}
        reference = sweep.what == RUN_REFERENCE
        view.rows = [outcome_row(ctx, r, by_spec[s], reference) if s in by_spec else r
                     for s, r in zip(specs, view.rows)]
        report(view)

    def stopping(view: SweepView) -> SweepView:
        busy = {SHOWN_STATES[k] for k in (sweep_states.RUNNING, sweep_states.LOADING, sweep_states.WAITING)}
        return replace(view, rows=[replace(r, state=STOPPING) if r.state in busy else r for r in view.rows])

    return live_updates(work, stop, stopping)


def sweep_problem(ctx: LabContext) -> str | None:
    """Why this lab cannot submit a sweep now (public deployment, no cluster), or None."""
    if not sweep_allowed(ctx.settings):
        return SWEEP_OFF
    if not ctx.settings.ray_address:
        return NO_CLUSTER
    return None


def on_cluster(ctx: LabContext, plan: Callable[[], T], updates: Callable[[T], Iterator[V]], render: Callable[[V], str],
               view: Callable[..., V]) -> Iterator[str]:
    """A cluster handler's body: refused where this lab offers no cluster (here, not only hidden: a visitor can
    call the endpoint directly), a choice that cannot run one line (`plan` raises LabError), else each view of
    `updates(plan())` as HTML; at the end, the last view's error and each failed engine as a warning."""
    problem = sweep_problem(ctx)
    if problem is not None:
        gr.Warning(problem)
        yield render(view(esc(problem)))
        return
    try:
        chosen = plan()
    except LabError as exc:
        gr.Warning(str(exc))
        yield render(view("", error=str(exc)))
        return
    shown = None
    for shown in updates(chosen):
        yield render(shown)
    if shown is not None:
        for line in [shown.error, *(f"{r.name}: {r.state}" for r in shown.rows if r.state.startswith("failed"))]:
            if line:
                gr.Warning(line)


def build_sweep_panel(ctx: LabContext, stops: SessionEvents, inputs: dict, live: gr.HTML,
                      more: Callable[[gr.Textbox, gr.Number], None] | None = None) -> None:
    """The cluster controls under Batch's (shown when LAB_RAY_ADDRESS is set on the owner's lab); the
    `/run_sweep` endpoint exists either way and refuses by itself. `more(patterns, samples)` adds controls
    inside the panel that share its SPECs and samples (the race's)."""
    shown = sweep_problem(ctx) is None
    # the id on a Column: Gradio's Group writes its elem_id on two nested elements (two `#lab-sweep` in the page)
    with gr.Column(visible=shown, elem_id="lab-sweep"), gr.Group():
        gr.HTML(f'<div class="lab-muted">Ray cluster: <code>{esc(ctx.settings.ray_address or "")}</code> · the chosen '
                "engines, plus any SPECs below, each run as a Ray actor on the cluster; this app writes the files "
                "and the store.</div>" if shown else "")
        with gr.Row(equal_height=True):
            patterns = gr.Textbox(label="more engine SPECs for the cluster (one a line: ranges {100..500..100}, "
                                  "globs, @FILE)", lines=2, scale=3, elem_id="lab-sweep-specs")
            shards = gr.Number(1, precision=0, minimum=1, maximum=MAX_SHARDS, label="shards per engine",
                               elem_id="lab-sweep-shards")
            samples = gr.Number(1, precision=0, minimum=1, label="samples per step", elem_id="lab-sweep-samples")
            start = gr.Button("Run on the Ray cluster", variant="primary", elem_id="lab-sweep-run")
        if more is not None:
            more(patterns, samples)

    def run_sweep(names, specs_text, task_sel, bucket_sel, group_sel, n_shards, n_samples, do_resume, fresh, name,
                  run_what=ANSWERS):
        yield from on_cluster(
            ctx, lambda: plan_sweep(ctx, names, specs_text, task_sel, bucket_sel, group_sel, n_shards, n_samples,
                                    bool(fresh), name, REFERENCE if run_what == REFERENCE else ANSWERS),
            lambda choice: sweep_updates(ctx, choice, bool(do_resume), stops.get(current_session())), render_view,
            SweepView)

    # no queue of its own: a second caller reaches the slot at once and is told a sweep is running
    start.click(run_sweep, [inputs["engines"], patterns, inputs["tasks"], inputs["buckets"], inputs["groups"], shards,
                            samples, inputs["resume"], inputs["new_run"], inputs["run_name"], inputs["what"]], live,
                api_name="run_sweep", concurrency_limit=None)
