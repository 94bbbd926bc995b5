"""Import result JSON files and the shipped leaderboard CSVs into the store; rebuild it from results/."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from lab.errors import LabError, ResultFileError
from lab.resultfiles.files import iter_result_files, parse_result_bytes, scorer_for
from lab.store.db import Store, quote_ident
from lab.store.equiv_fill import PENDING, after_import, fills_after
from lab.store.leaderboards import LEADERBOARD_FILES, read_leaderboard_csv
from lab.store.records import ModelFacts, run_row, steps_table
from lab.store.reference_records import import_reference, is_reference_result
from lab.store.sample_records import delete_samples, insert_samples, sample_tables
from lab.store.unique_names import unique_display_names

RUN_ID_CHARS = 12
# First folder of a run's stored path -> its `runs.source` (files elsewhere are 'file'): `python -m lab demo`
# writes its synthetic pair under `<results>/synthetic/`
SOURCE_BY_FOLDER = {"published": "published", "synthetic": "synthetic"}


def source_of(stored_path: str) -> str:
    """'published' for files under `<results>/published/`, 'synthetic' under `<results>/synthetic/`, else 'file'."""
    return SOURCE_BY_FOLDER.get(stored_path.split("/", 1)[0], "file") if "/" in stored_path else "file"


@dataclass
class ImportReport:
    """What an import did: files added, skipped (unchanged) and failed, each with its reason."""

    added: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    tables: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    def merge(self, other: "ImportReport") -> "ImportReport":
        self.added += other.added
        self.skipped += other.skipped
        self.failed += other.failed
        self.tables.update(other.tables)
        return self

    def summary(self) -> str:
        lines = [f"{len(self.added)} added, {len(self.skipped)} unchanged, {len(self.failed)} failed"]
        lines += [f"loaded {table}: {n} rows" for table, n in self.tables.items()]
        lines += [f"added {p}" for p in self.added]
        lines += [f"FAILED {p}: {why}" for p, why in self.failed]
        return "\n".join(lines)


def run_id_of(content: bytes) -> str:
    """Stable run id: the short sha1 of the file's bytes."""
    return hashlib.sha1(content).hexdigest()[:RUN_ID_CHARS]


def stored_path(path: Path, results_dir: Path | None) -> str:
    """How the store records a result file's path: relative to the results folder when under it."""
    p = path.resolve()
    if results_dir is not None:
        try:
            return p.relative_to(results_dir.resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def _lookups(store: Store) -> tuple[dict[str, str], dict[str, ModelFacts]]:
    """Short-name → repo and repo → facts, from the published leaderboard."""
    df = store.query(
        "SELECT model_short, model_id, family, params_b, active_params_b, training, training_method, epochs "
        "FROM leaderboard WHERE model_id IS NOT NULL ORDER BY row_no"
    )
    short_to_repo = {s: m for s, m in zip(df["model_short"], df["model_id"]) if isinstance(s, str) and s}
    facts: dict[str, ModelFacts] = {}
    for r in df.itertuples(index=False):
        if r.model_id not in facts:
            facts[r.model_id] = ModelFacts(
                family=r.family if isinstance(r.family, str) else None,
                params_b=None if pd.isna(r.params_b) else float(r.params_b),
                active_params_b=None if pd.isna(r.active_params_b) else float(r.active_params_b),
                training=r.training if isinstance(r.training, str) else None,
                training_method=r.training_method if isinstance(r.training_method, str) else None,
                epochs=None if pd.isna(r.epochs) else int(r.epochs),
            )
    return short_to_repo, facts


def _with_aggregate(result: dict) -> dict:
    """A result lacking `aggregate` (or with an empty one) gets it computed from its per-step rows (SPEC §7)."""
    aggregate = result.get("aggregate")
    if isinstance(aggregate, dict) and "avg_command_f1" in aggregate:
        return result
    from lab.scoring.aggregate import aggregate_scores  # only needed for such files

    return {**result, "aggregate": aggregate_scores(result["per_step"], scorer_for(result))}


def _known_files(store: Store) -> dict[str, tuple[int, float, str]]:
    """path -> (size, mtime, run_id) of every imported file, to skip unchanged files without reading them."""
    df = store.query("SELECT path, file_size, file_mtime, run_id FROM runs UNION ALL "
                     "SELECT path, file_size, file_mtime, ref_run_id FROM reference_runs")
    return {p: (int(sz), float(mt), rid) for p, sz, mt, rid in zip(df["path"], df["file_size"], df["file_mtime"], df["run_id"])
            if not pd.isna(sz) and not pd.isna(mt)}


def import_file(
    store: Store, path: str | os.PathLike, report: ImportReport | None = None, *, _lookup=None, _known=None
) -> ImportReport:
    """Import one result JSON: one transaction, all or nothing; unchanged content is skipped."""
    report = report if report is not None else ImportReport()
    p = Path(path)
    name = str(p)
    path_key = stored_path(p, store.results_dir)
    try:
        stat = p.stat()
        if not p.is_file():  # a FIFO or device would block or never end
            raise ResultFileError(f"{name}: not a regular file")
        known = (_known if _known is not None else _known_files(store)).get(path_key)
        if known is not None and known[:2] == (stat.st_size, stat.st_mtime):
            report.skipped.append((name, f"unchanged (run {known[2]})"))
            return report
        content = p.read_bytes()
        run_id = run_id_of(content)
        same = store.query("SELECT path FROM runs WHERE run_id = $run_id", {"run_id": run_id})
        if len(same):
            if same["path"][0] == path_key:  # touched but identical: refresh size/mtime only
                store.execute(
                    "UPDATE runs SET file_size = $size, file_mtime = $mtime WHERE run_id = $run_id",
                    {"size": stat.st_size, "mtime": stat.st_mtime, "run_id": run_id},
                )
            report.skipped.append((name, f"unchanged (same content as run {run_id}: {same['path'][0]})"))
            return report
        if b'"tb2lite-reference-likelihood"' in content[:4096]:
            from lab import jsontext

            data = jsontext.loads(content)
            if is_reference_result(data):  # a score-reference file: its own tables, not a run
                import_reference(store, data, run_id, path=path_key, name=name, file_size=stat.st_size,
                                 file_mtime=stat.st_mtime)
                report.added.append(name)
                return report
        result = parse_result_bytes(content, name)
        result = _with_aggregate(result)
        short_to_repo, facts = _lookup if _lookup is not None else _lookups(store)
        row = run_row(
            result, run_id, path=path_key, file_size=stat.st_size, file_mtime=stat.st_mtime,
            imported_at=datetime.now(timezone.utc).replace(tzinfo=None),
            short_to_repo=short_to_repo, facts_by_id=facts,
        )
        row["source"] = source_of(path_key)
        row["equiv_state"] = PENDING  # equiv columns: filled after the commit (lab.store.equiv_fill)
        steps = steps_table(run_id, result["per_step"], name)
        sampled = sample_tables(run_id, result, name)
        run_df = pd.DataFrame([row])
        with store.transaction() as cur:
            # a changed file replaces the run it was imported as before
            cur.execute("DELETE FROM steps WHERE run_id IN (SELECT run_id FROM runs WHERE path = ?)", [path_key])
            delete_samples(cur, path_key)
            cur.execute("DELETE FROM runs WHERE path = ?", [path_key])
            cur.register("new_run", run_df)
            cur.register("new_steps", steps)
            try:
                cur.execute("INSERT INTO runs BY NAME SELECT * FROM new_run")
                cur.execute("INSERT INTO steps BY NAME SELECT * FROM new_steps")
                insert_samples(cur, sampled)
            finally:
                cur.unregister("new_run")
                cur.unregister("new_steps")
        unique_display_names(store)
        report.added.append(name)
        after_import(store, run_id)
    except (LabError, OSError, ValueError, TypeError, KeyError) as exc:
        report.failed.append((name, str(exc)))
    except Exception as exc:  # a DuckDB constraint error, etc.: still reported by name, nothing kept
        report.failed.append((name, f"{type(exc).__name__}: {exc}"))
    return report


def import_path(store: Store, *paths: str | os.PathLike) -> ImportReport:
    """Import result JSON files and/or folders of them (recursively)."""
    report = ImportReport()
    # one short lock on the file for the whole import (no other process interleaves); the equiv
    # columns are filled after it is let go (lab.store.equiv_fill)
    with fills_after(store), store.hold():
        lookup, known = _lookups(store), _known_files(store)
        for path in paths:
            p = Path(path)
            if not p.exists():
                report.failed.append((str(p), "no such file or folder"))
                continue
            if not (p.is_file() or p.is_dir()):
                report.failed.append((str(p), "not a regular file or folder"))
                continue
            for file in iter_result_files(p):
                import_file(store, file, report, _lookup=lookup, _known=known)
    return report


def import_leaderboards(store: Store, results_dir: str | os.PathLike) -> ImportReport:
    """(Re)load the shipped CSVs found in `results_dir` into their tables, all in one transaction."""
    report = ImportReport()
    root = Path(results_dir)
    frames = {}
    for spec in LEADERBOARD_FILES:
        path = root / spec.filename
        if path.is_file():
            frames[spec.table] = read_leaderboard_csv(spec, path)
        else:
            report.skipped.append((str(path), "not present"))
    with store.transaction() as cur:
        for table, df in frames.items():
            cur.execute(f"DELETE FROM {quote_ident(table)}")
            cur.register("new_rows", df)
            try:
                cur.execute(f"INSERT INTO {quote_ident(table)} BY NAME SELECT * FROM new_rows")
            finally:
                cur.unregister("new_rows")
            report.tables[table] = len(df)
    return report


def rebuild(store: Store, results_dir: str | os.PathLike | None = None) -> ImportReport:
    """Recreate the core tables and fill them from `results_dir`: the CSVs, then every result JSON."""
    root = Path(results_dir) if results_dir is not None else store.results_dir
    store.create_core_schema()
    if root is None or not root.is_dir():
        return ImportReport()
    report = import_leaderboards(store, root)
    return report.merge(import_path(store, root))
