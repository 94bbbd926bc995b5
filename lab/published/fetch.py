"""Fetch published runs and import them: select runs from the catalogue, download their files
(lab.published.download, into the cache), place each run (a whole file, or its shards merged) at
`<results>/published/<run>.json` and import it with `source = 'published'`; at start-up, the owner's set
(`LAB_PUBLISHED`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from lab.errors import LabError
from lab.published.cache import Cache
from lab.published.catalogue import Entry, Run, load_catalogue, runs_of, series_names
from lab.published.download import ATTEMPTS, FetchReport, ProgressFn, fetch_entries
from lab.security.safe_files import link_problem, read_bytes, write_bytes_atomic
from lab.settings import env

PUBLISHED_FOLDER = "published"  # under the results folder


# -- selection -----------------------------------------------------------------------------------
def select_runs(all_runs: bool = False, series: Iterable[str] = (), names: Iterable[str] = (),
                catalogue: list[Entry] | None = None) -> list[Run]:
    """The catalogue runs asked for: every run, the runs of named series, or runs/paths by name.

    A name matches a run key, a repository path, or (when unique) a file name; LabError lists what
    did not match."""
    entries = catalogue if catalogue is not None else load_catalogue()
    runs = runs_of(entries)
    if all_runs:
        return list(runs.values())
    chosen: dict[str, Run] = {}
    known_series = series_names(entries)
    for name in series:
        match = [s for s in known_series if s == name] or [s for s in known_series if name.lower() in s.lower()]
        if not match:
            raise LabError(f"unknown series '{name}'; known: {'; '.join(known_series)}")
        for s in match:
            chosen.update({k: runs[k] for k in known_series[s]})
    for name in names:
        key = name.removesuffix(".json")
        hits = [r for r in runs.values() if key in (r.key, r.key.split("/")[-1])
                or any(name == f.path or name.endswith("/" + f.path.split("/")[-1]) or name == f.path.split("/")[-1]
                       for f in (*r.files, *r.pieces))]
        if not hits:
            raise LabError(f"'{name}' is not in the published catalogue; see `python -m lab data published list`")
        chosen.update({r.key: r for r in hits})
    return list(chosen.values())


# -- import --------------------------------------------------------------------------------------
def run_file(results_dir: str | Path, run: Run) -> Path:
    return Path(results_dir) / PUBLISHED_FOLDER / f"{run.key}.json"


def published_path(ref: str, settings) -> str | None:
    """The stored path of the published run `ref` names (None: it names no published run); LabError when it
    names one that is not fetched yet. `python -m lab compare` finds a published run in the store by it."""
    try:
        runs = select_runs(names=[ref], catalogue=load_catalogue())
    except LabError:
        return None
    if len(runs) != 1:
        return None
    run = runs[0]
    if not run_file(settings.results_dir, run).is_file():
        raise LabError(f"published run {run.key} is not fetched yet: fetch it with "
                       f"`python -m lab data published fetch {run.key}` (needs internet), then compare again")
    return f"{PUBLISHED_FOLDER}/{run.key}.json"


def merged_pieces(pieces: list[dict]) -> dict:
    """Shards/parts of one run as one result dict: steps in piece order, the aggregate recomputed."""
    from lab.resultfiles.files import scorer_for
    from lab.scoring.aggregate import aggregate_scores

    seen, per_step = set(), []
    for piece in pieces:
        for row in piece.get("per_step") or []:
            key = (row.get("task_id"), row.get("step_idx"))
            if key not in seen:
                seen.add(key)
                per_step.append(row)
    merged = {k: v for k, v in pieces[0].items() if k not in ("per_step", "aggregate")}
    merged["per_step"] = per_step
    merged["aggregate"] = aggregate_scores(per_step, scorer_for(merged))
    merged["merged_from"] = len(pieces)
    return merged


def write_run_file(run: Run, cache: Cache, results_dir: str | Path) -> Path:
    """Place a fetched run under `<results>/published/` (unchanged bytes when it is one file);
    an identical file already there is left untouched (so a second fetch changes nothing)."""
    target = run_file(results_dir, run)
    if len(run.files) == 1:
        content = cache.file(run.files[0]).read_bytes()
    else:
        pieces = [json.loads(cache.file(f).read_bytes()) for f in run.files]
        content = json.dumps(merged_pieces(pieces), ensure_ascii=False).encode("utf-8")
    if (link_problem(target) is None and target.is_file() and target.stat().st_size == len(content)
            and read_bytes(target) == content):
        return target
    return write_bytes_atomic(target, content)  # a fresh temporary file, never written through a link


@dataclass
class PublishedReport:
    fetch: FetchReport
    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.fetch.failed

    def summary(self) -> str:
        f = self.fetch
        lines = [f"{len(f.downloaded)} downloaded ({len(f.resumed)} resumed), {len(f.cached)} from the cache; "
                 f"{len(self.imported)} runs imported, {len(self.unchanged)} unchanged, "
                 f"{len(self.failed) + len(f.failed)} failed"]
        lines += [f"imported {k}" for k in self.imported]
        by_reason: dict[str, list[str]] = {}  # one line per reason: a host that cannot be resolved is said once
        for path, why in (*f.failed, *self.failed):
            by_reason.setdefault(why.removeprefix(f"{path}: "), []).append(path)
        for why, paths in by_reason.items():
            more = f", and {len(paths) - 3} more" if len(paths) > 3 else ""
            what = paths[0] if len(paths) == 1 else f"{len(paths)} files ({', '.join(paths[:3])}{more})"
            lines.append(f"FAILED {what}: {why}")
        return "\n".join(lines)


def fetch_and_import(store, runs: list[Run], cache_dir: str | Path, results_dir: str | Path, *,
                     progress: bool = True, on_progress: ProgressFn | None = None,
                     base: str | None = None, attempts: int = ATTEMPTS) -> PublishedReport:
    """Fetch the runs' files, place each run under `<results>/published/`, import it into `store`."""
    from lab.store.importer import import_file
    from lab.published.links import link_published

    cache = Cache(cache_dir)
    entries = [f for r in runs for f in r.files]
    report = PublishedReport(fetch_entries(entries, cache_dir, base=base, progress=progress,
                                           on_progress=on_progress, attempts=attempts))
    failed_paths = {p for p, _ in report.fetch.failed}
    for run in runs:
        if any(f.path in failed_paths for f in run.files):
            continue
        try:
            path = write_run_file(run, cache, results_dir)
        except (OSError, ValueError) as exc:
            report.failed.append((run.key, f"{type(exc).__name__}: {exc}"))
            continue
        result = import_file(store, path)
        if result.failed:
            report.failed.extend(result.failed)
        elif result.added:
            report.imported.append(run.key)
        else:
            report.unchanged.append(run.key)
    link_published(store)
    return report


def import_cached(store, runs: list[Run], cache_dir: str | Path, results_dir: str | Path) -> PublishedReport:
    """Import the runs whose files are all in the cache already (no network): for start-up."""
    cache = Cache(cache_dir)
    ready = [r for r in runs if all(cache.file(f).is_file() for f in r.files)]
    return fetch_and_import(store, ready, cache_dir, results_dir, progress=False)


def select_set(spec: str, catalogue: list[Entry] | None = None) -> list[Run]:
    """The runs of an owner's set (`LAB_PUBLISHED`): items separated by ';' or ',', each `all`, a series
    name (or part of one) or a run name."""
    entries = catalogue if catalogue is not None else load_catalogue()
    items = [i.strip() for i in spec.replace(";", ",").split(",") if i.strip()]
    if any(i.lower() == "all" for i in items):
        return select_runs(all_runs=True, catalogue=entries)
    known = series_names(entries)
    chosen: dict[str, Run] = {}
    for item in items:
        is_series = any(item.lower() in s.lower() for s in known)
        runs = select_runs(series=[item], catalogue=entries) if is_series else select_runs(names=[item], catalogue=entries)
        chosen.update({r.key: r for r in runs})
    return list(chosen.values())


def load_owner_set(store, settings, spec: str | None = None, progress: bool = True) -> PublishedReport | None:
    """At start-up: fetch (or take from the cache) and import the set named by `LAB_PUBLISHED`, and
    refresh the published links (also after a store rebuild). None when no set is configured."""
    from lab.published.links import link_published
    from lab.store.unique_names import unique_display_names

    spec = spec if spec is not None else env("LAB_PUBLISHED", "")
    if store is not None:
        unique_display_names(store)  # a store built before names were made unique
        if (Path(settings.results_dir) / PUBLISHED_FOLDER).is_dir():
            link_published(store)
    if not spec.strip() or store is None:
        return None
    return fetch_and_import(store, select_set(spec), settings.cache_dir, settings.results_dir, progress=progress)
