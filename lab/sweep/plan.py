"""A sweep from start to files: its jobs (one per engine SPEC, or per shard), and what each engine
ended as once the driver is done (shards merged). The CLI and the Batch tab share this path."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from lab.errors import LabError
from lab.sweep.driver import Job
from lab.runs.options import ReplaySource, RunOptions
from lab.sweep.options import ANSWERS, REFERENCE, JobOptions
from lab.sweep.progress import ProgressFn


@dataclass
class Sweep:
    """What to run: engines, the selected steps of one replay, the run options of every engine's run."""

    specs: list[str]
    steps: list
    options: RunOptions  # the run options every engine's run is made with (scorer, chunk_size, samples, sampling …)
    source: ReplaySource  # the replay the steps come from
    out_dir: Path
    shards: int = 1
    run_names: list[str | None] = field(default_factory=list)  # one per spec; empty: engine names
    what: str = ANSWERS  # lab.sweep.options: each engine's answers, or its likelihood of the reference answers


@dataclass
class Outcome:
    """One engine's end: its result file and aggregate, or why it has none."""

    spec: str
    path: Path | None = None
    aggregate: dict | None = None
    error: str | None = None
    stopped: bool = False
    missing: int = 0  # selected steps its engine had no answer for (a stored run's): not in its file


@dataclass(frozen=True)
class Cluster:
    """The cluster a sweep runs on, as the driver found it."""

    address: str
    nodes: int  # alive nodes
    dashboard: str | None  # the dashboard's URL; None when it is off


def run_stems(specs: list[str], names: list[str | None]) -> list[str | None]:
    """Each engine's run file stem as the driver can tell before any worker loads it: the run name
    given, else the engine's own name (built, not loaded); None where the SPEC builds only on a worker."""
    from lab.engines import create_engine
    from lab.runs.replay import run_file_name

    stems: list[str | None] = []
    for spec, name in zip(specs, names):
        try:
            stems.append(run_file_name(create_engine(spec), name))
        except Exception:  # noqa: BLE001 - e.g. a model folder that exists on the workers only: the driver checks it later
            stems.append(None)
    return stems


def refuse_shared_names(specs: list[str], stems: list[str | None]) -> None:
    """LabError (one line) when two engines of one sweep would write the same result file (one file
    would survive and a checkpoint would mix both runs), as Batch refuses it."""
    seen: dict[str, str] = {}
    for spec, stem in zip(specs, stems):
        if stem is None:
            continue
        if stem in seen:
            raise LabError(f"two engines of this sweep would write {stem}.json ({seen[stem][:120]} and {spec[:120]}): "
                           "give each its own name (name=… in its SPEC)")
        seen[stem] = spec


def plan_jobs(sweep: Sweep, nodes: list[dict]) -> list[Job]:
    """One job per engine (or shard), with the Ray resources it needs; refuses, by name, an engine the
    cluster (`ray.nodes()`) cannot hold."""
    from lab.sweep.placement import check_fits, needs
    from lab.sweep.shards import shard_fields, split

    jobs: list[Job] = []
    names = sweep.run_names or [None] * len(sweep.specs)
    n = len(sweep.steps)
    for spec, run_name in zip(sweep.specs, names):
        want = needs(spec)
        check_fits(spec, want, nodes)
        pieces = split(n, sweep.shards) if sweep.shards > 1 else [range(n)]
        for i, piece in enumerate(pieces):
            extra = shard_fields(i, len(pieces), n) if sweep.shards > 1 else {}
            options = JobOptions(sweep.options, sweep.source, run_name, extra, sweep.what)
            resources = {k: v for k, v in want.items() if k in ("num_cpus", "num_gpus")}
            jobs.append(Job(spec, [sweep.steps[k] for k in piece], options, resources, run_name,
                            (i, len(pieces)) if sweep.shards > 1 else None))
    return jobs


def finish(sweep: Sweep, jobs: list[Job]) -> list[Outcome]:
    """Per engine: its file (shards merged into the unsharded run, written next to them), or its error."""
    from lab.runs.checkpoint import RunCheckpoint
    from lab.scoring.stability import DEFAULT_PASS_THRESHOLD
    from lab.sweep.shards import merge, merge_reference

    options = sweep.options
    outcomes = []
    for spec in sweep.specs:
        mine = [j for j in jobs if j.spec == spec]
        if any(j.error for j in mine):
            outcomes.append(Outcome(spec, error="; ".join(j.error for j in mine if j.error)))
            continue
        if any(j.result is None for j in mine):
            outcomes.append(Outcome(spec, stopped=True))
            continue
        missing = sum(j.missing for j in mine)
        if sweep.shards == 1:
            outcomes.append(Outcome(spec, mine[0].path, mine[0].result["aggregate"], missing=missing))
            continue
        if sweep.what == REFERENCE:
            merged = merge_reference([j.result for j in mine])
        else:
            threshold = options.pass_threshold if options.pass_threshold is not None else DEFAULT_PASS_THRESHOLD
            merged = merge([j.result for j in mine], options.scorer, options.samples, threshold,
                           [j.lengths for j in mine])
        # the shards' merged run: a finished run of that name is kept (this one gets NAME-2 …: lab.runs.claims)
        with RunCheckpoint.claim(sweep.out_dir, mine[0].path.name.rsplit('-shard', 1)[0]) as run:
            path = run.finish(merged)
        outcomes.append(Outcome(spec, path, merged["aggregate"], missing=missing))
    return outcomes


def execute(sweep: Sweep, address: str | None, resume: bool, *, progress: ProgressFn | None = None,
            stop: threading.Event | None = None, audit: bool = False,
            connected: Callable[[Cluster], None] | None = None) -> tuple[list[Job], list[Outcome]]:
    """Connect to Ray (lab.sweep.connect), run every job with progress to `progress` until done or
    `stop`, disconnect, and merge: the jobs (with their audit events) and each engine's outcome."""
    from lab.sweep.connect import connect, dashboard_url, disconnect, sweep_address
    from lab.sweep.driver import run_jobs

    names = sweep.run_names or [None] * len(sweep.specs)
    refuse_shared_names(sweep.specs, run_stems(sweep.specs, names))  # before anything connects
    ray, context = connect(address, stop)
    try:
        nodes = ray.nodes()
        if connected is not None:
            alive = sum(1 for n in nodes if n.get("Alive"))
            connected(Cluster(sweep_address(address), alive, dashboard_url(context)))
        jobs = plan_jobs(sweep, nodes)
        run_jobs(ray, jobs, sweep.out_dir, resume, audit=audit, progress=progress, stop=stop)
    finally:
        disconnect(ray)
    return jobs, finish(sweep, jobs)
