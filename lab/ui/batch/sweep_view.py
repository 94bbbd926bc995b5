"""The Batch tab's view of a cluster sweep: per-engine rows (shards summed) made from the sweep's progress
snapshots, the line about the cluster (nodes, dashboard link), and their HTML."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lab.sweep import progress as sweep_states
from lab.sweep.plan import Cluster
from lab.sweep.progress import JobProgress
from lab.ui.batch.rows import BatchRow, render_aggregate
from lab.ui.shell.html_text import esc

STOPPING = "stopping (actors killed; finished steps kept)"
SHOWN_STATES = {
    sweep_states.WAITING: "waiting for room on the cluster",
    sweep_states.LOADING: "loading on its node",
    sweep_states.RUNNING: "running",
    sweep_states.REPLACING: "re-placing (its node was lost; resumes from the last step received)",
    sweep_states.DONE: "writing its file",
    sweep_states.STOPPED: "stopped (run again with 'resume' to continue)",
}


@dataclass
class SweepView:
    """What the table shows: a line about the cluster, a row per engine, and an error line if any."""

    cluster: str
    rows: list[BatchRow] = field(default_factory=list)
    error: str | None = None


def cluster_line(cluster: Cluster) -> str:
    """The line above the table: the cluster's address, its nodes and a link to its dashboard."""
    dash = (f'dashboard: <a href="{esc(cluster.dashboard)}" target="_blank" rel="noopener">{esc(cluster.dashboard)}</a>'
            if cluster.dashboard else "dashboard off")
    return (f'Ray cluster <code>{esc(cluster.address)}</code> · {cluster.nodes} node{"s" if cluster.nodes != 1 else ""}'
            f' · <span data-field="dashboard">{dash}</span>')


def render_view(view: SweepView) -> str:
    """The cluster line, the error line (if any) and the live table with its overall line."""
    error = f'<div class="lab-error-box" data-field="error">{esc(view.error)}</div>' if view.error else ""
    table = render_aggregate(view.rows, overall=True) if view.rows else ""
    return f'<div class="lab-muted lab-sweep-cluster" data-field="cluster">{view.cluster}</div>{error}{table}'


def engine_rows(snapshots: Sequence[JobProgress], specs: Sequence[str], stems: Sequence[str],
                finished: dict[str, BatchRow]) -> list[BatchRow]:
    """One row per engine (its shards summed), in the order chosen: the table's view of the progress."""
    rows = []
    for spec, stem in zip(specs, stems):
        if spec in finished:
            rows.append(finished[spec])
            continue
        mine = [s for s in snapshots if s.spec == spec]
        states = [s.state for s in mine]
        errors = [s.error for s in mine if s.error]
        if errors:
            state = f"failed: {'; '.join(errors)}"
        else:
            state = next((SHOWN_STATES[k] for k in (sweep_states.REPLACING, sweep_states.RUNNING, sweep_states.LOADING,
                                                     sweep_states.WAITING, sweep_states.STOPPED) if k in states),
                         SHOWN_STATES[sweep_states.DONE])
        nodes = ", ".join(dict.fromkeys(s.node for s in mine if s.node))
        rows.append(BatchRow(stem, sum(s.done for s in mine), sum(s.total for s in mine), state=state, node=nodes))
    return rows
