"""The Batch tab's rows: which steps a filter selects, one engine's live line, and the live table
(shared by local batches and cluster sweeps)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from lab.data.step import Step
from lab.runs.meter import LiveFigures, describe
from lab.ui.shell.html_text import esc, fmt

BUCKETS = ("early", "mid", "late")
# what a batch runs: each engine's answers (a replay), or the reference answers' likelihood (score-reference)
ANSWERS, REFERENCE = "answers (replay)", "reference likelihood (score-reference)"
WHAT = (ANSWERS, REFERENCE)
# Steps generated between two checks of the Stop button (and two checkpoint syncs); on a cluster, how
# often finished steps come back to the app.
BATCH_CHUNK = 8
LIVE_EVERY_S = 1.0  # how often a running engine's line shows its tokens so far between finished steps


def filter_steps(steps: list[Step], tasks: list[str] | None, buckets: list[str] | None,
                 groups: list[str] | None) -> list[Step]:
    """Steps whose task, bucket and source group are among the chosen ones (empty choice = all)."""
    return [
        s for s in steps
        if (not tasks or s.task_id in tasks) and (not buckets or s.bucket in buckets)
        and (not groups or s.source_group in groups)
    ]


@dataclass
class BatchRow:
    """One engine's line in the live aggregate."""

    name: str
    done: int
    total: int
    aggregate: dict | None = None
    state: str = "waiting"
    path: str | None = None
    run_id: str | None = None
    node: str | None = None  # where a cluster sweep runs it (None: this machine)
    live: LiveFigures | None = None  # tokens so far, tok/s, time left (lab.runs.meter); None: nothing generated


def _pct(value: object) -> str:
    return "–" if value is None else f"{float(value):.1f}"


def _bar(done: int, total: int) -> str:
    width = 100 * done / max(total, 1)
    return (f'<span class="lab-bar" title="{done}/{total}"><span style="width:{width:.1f}%;'
            f'background:#6366f1"></span></span>')


def _steps_cell(r: BatchRow) -> str:
    """Steps done / total and the bar, and under them the tokens so far, tok/s and the time left (estimated)."""
    live = describe(r.live)
    line = f'<div class="lab-muted" data-field="live">{esc(live)}</div>' if live else ""
    return f'<td><span data-field="steps">{r.done}/{r.total}</span>{_bar(r.done, r.total)}{line}</td>'


def _state_class(state: str) -> str:
    return esc(state.split(" ")[0].rstrip(":"))


def render_aggregate(rows: Sequence[BatchRow], overall: bool = False) -> str:
    """Live aggregate per engine: steps done / total, score, F1, first exact, valid JSON, status (and the
    node, for a cluster sweep); `overall` adds a last line with all steps done / total."""
    if not rows:
        return '<div class="lab-muted">No batch run yet: choose engines and a filter, then <b>Run batch</b>.</div>'
    nodes = any(r.node is not None for r in rows)
    body = []
    for r in rows:
        agg = r.aggregate or {}
        f1 = agg.get("avg_command_f1")
        node = f'<td data-field="node">{esc(r.node or "–")}</td>' if nodes else ""
        if agg.get("kind") == REFERENCE:  # a score-reference run: its NLL per token, no answers to score
            nll = agg.get("ref_nll_per_token")
            body.append(
                f'<tr data-engine="{esc(r.name)}"><td><b>{esc(r.name)}</b></td>'
                f'<td><span data-field="steps">{r.done}/{r.total}</span>{_bar(r.done, r.total)}</td>'
                f'<td data-field="ref_nll" colspan="4">reference NLL/token '
                f'{fmt(nll)} ({agg.get("steps_scored", r.done)} steps scored)</td>{node}'
                f'<td data-field="state" class="lab-state-{_state_class(r.state)}">{esc(r.state)}</td></tr>')
            continue
        body.append(
            f'<tr data-engine="{esc(r.name)}"><td><b>{esc(r.name)}</b></td>{_steps_cell(r)}'
            f'<td data-field="score">{"–" if f1 is None else f"{100 * f1:.2f}"}</td>'
            f'<td data-field="f1">{"–" if f1 is None else f"{f1:.4f}"}</td>'
            f"<td>{_pct(agg.get('first_cmd_exact_pct'))}</td><td>{_pct(agg.get('valid_json_pct'))}</td>{node}"
            f'<td data-field="state" class="lab-state-{_state_class(r.state)}">{esc(r.state)}</td></tr>'
        )
    if overall:
        done, total = sum(r.done for r in rows), sum(r.total for r in rows)
        body.append(f'<tr data-engine="" class="lab-overall"><td><b>overall</b></td>'
                    f'<td><span data-field="steps">{done}/{total}</span>{_bar(done, total)}</td>'
                    f'<td colspan="{6 if nodes else 5}"></td></tr>')
    head = ("<tr><th>engine</th><th>steps</th><th>score</th><th>command F1</th><th>first exact %</th>"
            f"<th>valid JSON %</th>{'<th>node</th>' if nodes else ''}<th>status</th></tr>")
    return f'<table class="lab-engines lab-batch">{head}{"".join(body)}</table>'
