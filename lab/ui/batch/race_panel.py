"""The Batch tab's race beside its cluster sweep: the same engines and SPECs, the same filter and samples,
raced in rounds of whole tasks on the Ray cluster (lab.sweep.race). The app process is the race's driver;
the live table shows each checkpoint's progress and, after every round, the race table (steps, score, Δ
vs the leader with the race's interval, P(best), status). Stop keeps every step received."""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

import gradio as gr

from lab.errors import LabError
from lab.sweep import progress as sweep_states
from lab.sweep.plan import Cluster
from lab.sweep.progress import JobProgress
from lab.sweep.race_book import RaceBook, RoundRecord, Standing
from lab.ui.batch.live import live_updates
from lab.ui.batch.rows import ANSWERS
from lab.ui.batch.sweep_panel import BUSY, SLOT, SweepChoice, _whole, on_cluster, plan_sweep
from lab.ui.batch.sweep_view import SHOWN_STATES, STOPPING, SweepView, cluster_line, engine_rows, render_view
from lab.ui.shell.html_text import esc
from lab.ui.shell.session import current_session
from lab.visitors import SessionEvents

MAX_ROUND_TASKS = 1000
MAX_BUDGET = 10**9
RACE_STATES = {"between rounds": "racing (waiting for the round to end)", "eliminated": "eliminated (checkpoint kept)",
               "finalist": "finalist (checkpoint kept)"}


@dataclass
class RaceView(SweepView):
    """The sweep's view and the race table's HTML."""

    race: str = ""


def standing_row(s: Standing) -> str:
    from lab.sweep.race_table import status_text

    def cell(field: str, text: str) -> str:
        return f'<td data-field="{field}">{esc(text)}</td>'

    ci = "—" if s.ci is None else f"[{s.ci[0]:+.2f}, {s.ci[1]:+.2f}]"
    return (f'<tr data-checkpoint="{esc(s.name)}" class="lab-race-{esc(s.status)}">' + cell("name", s.name)
            + cell("steps", str(s.steps)) + cell("score", "—" if s.score is None else f"{s.score:.2f}")
            + cell("delta", "—" if s.delta is None else f"{s.delta:+.2f}") + cell("ci", ci)
            + cell("p_best", "—" if s.p_best is None else f"{s.p_best:.2f}") + cell("status", status_text(s)) + "</tr>")


def render_race(book: RaceBook, record: RoundRecord | None) -> str:
    """The round's line and the race table as HTML."""
    from lab.sweep.race_table import HEADER, round_line

    head = "".join(f"<th>{esc(h)}</th>" for h in HEADER)
    ended = f' · <span data-field="ended">race ended: {esc(book.ended)}</span>' if book.ended else ""
    return (f'<div class="lab-muted" data-field="round">{esc(round_line(book, record))}{ended}</div>'
            f'<table class="lab-race" data-field="race"><tr>{head}</tr>'
            + "".join(standing_row(s) for s in book.standings()) + "</table>")


def render_race_view(view: RaceView) -> str:
    return render_view(view) + view.race


def plan_race(ctx, names: Sequence[str] | None, patterns: str | None, task_sel, bucket_sel, group_sel, samples: object,
              fresh: bool, round_tasks: object, budget: object):
    """The race the tab's choices ask for (answers, one engine per checkpoint, the CLI's defaults otherwise)."""
    from lab.scoring.sequential import load_race_settings
    from lab.sweep.race import Race

    choice = plan_sweep(ctx, names, patterns, task_sel, bucket_sel, group_sel, 1, samples, fresh, None, ANSWERS)
    rounds = _whole(round_tasks or load_race_settings().round_tasks, "tasks per round", MAX_ROUND_TASKS)
    steps = None if budget in (None, "", 0) else _whole(budget, "step budget", MAX_BUDGET)
    if choice.finished:
        raise LabError(f"{', '.join(r.name for r in choice.finished.values())}: a finished run of that name is kept; "
                       "tick 'start a new run' to race it under a new name")
    return choice, Race(choice.sweep, rounds, 0, steps)


def race_updates(ctx, choice: SweepChoice, race, resume: bool, stop: threading.Event) -> Iterator[RaceView]:
    """Drive the race in a thread (one sweep or race at a time per app) and yield the view after every change."""
    from lab.sweep.connect import sweep_address
    from lab.sweep.race import execute_race

    address = sweep_address(ctx.settings.ray_address)
    specs, stems = choice.specs, choice.stems
    view = RaceView(f"connecting to the Ray cluster at <code>{esc(address)}</code> …")
    view.rows = engine_rows([JobProgress(s, s, 0, 0) for s in specs], specs, stems, {})

    def drive(report) -> None:
        report(replace(view))
        try:
            execute_race(race, address, resume, progress=progress(report), stop=stop, connected=connected(report),
                         on_round=rounds(report))
        except LabError as exc:
            view.error = str(exc)
            report(replace(view))

    def work(report) -> None:
        SLOT.hold(stop, report, RaceView("", error=BUSY), drive)

    def connected(report):
        def show(cluster: Cluster) -> None:
            view.cluster = cluster_line(cluster)
            report(replace(view))
        return show

    def progress(report):
        def show(snapshots: list[JobProgress]) -> None:
            view.rows = engine_rows(snapshots, specs, stems, {})
            for row, snap in zip(view.rows, snapshots):  # one job per checkpoint, in the same order
                row.state = RACE_STATES.get(snap.state, row.state)
            report(replace(view))
        return show

    def rounds(report):
        def show(book: RaceBook, record: RoundRecord | None) -> None:
            view.race = render_race(book, record)
            report(replace(view))
        return show

    def stopping(shown: RaceView) -> RaceView:
        busy = {SHOWN_STATES[k] for k in (sweep_states.RUNNING, sweep_states.LOADING, sweep_states.WAITING)}
        return replace(shown, rows=[replace(r, state=STOPPING) if r.state in busy else r for r in shown.rows])

    return live_updates(work, stop, stopping)


def build_race_controls(ctx, stops: SessionEvents, inputs: dict, live: gr.HTML, patterns: gr.Textbox,
                        samples: gr.Number) -> None:
    """The race's row of the cluster panel: tasks per round, a step budget, and its button (`/run_race`)."""
    from lab.scoring.sequential import load_race_settings

    with gr.Row(equal_height=True):
        gr.HTML('<div class="lab-muted">Race: replay the engines as a checkpoint series in rounds of whole tasks; '
                "after each round, stop replaying every one that is worse than the leader with 95 % confidence "
                "(its steps are kept for resume).</div>", elem_id="lab-race-about")
        round_tasks = gr.Number(load_race_settings().round_tasks, precision=0, minimum=1, label="tasks per round",
                                elem_id="lab-race-round-tasks")
        budget = gr.Number(0, precision=0, minimum=0, label="step budget (0: none)", elem_id="lab-race-budget")
        start = gr.Button("Race on the Ray cluster", variant="primary", elem_id="lab-race-run")

    def run_race(names, specs_text, task_sel, bucket_sel, group_sel, n_samples, do_resume, fresh, n_round, n_budget):
        yield from on_cluster(
            ctx, lambda: plan_race(ctx, names, specs_text, task_sel, bucket_sel, group_sel, n_samples, bool(fresh),
                                   n_round, n_budget),
            lambda chosen: race_updates(ctx, *chosen, bool(do_resume), stops.get(current_session())),
            render_race_view, RaceView)

    start.click(run_race, [inputs["engines"], patterns, inputs["tasks"], inputs["buckets"], inputs["groups"], samples,
                           inputs["resume"], inputs["new_run"], round_tasks, budget], live,
                api_name="run_race", concurrency_limit=None)
