"""Helpers shared by the store tests: a results folder with the shipped CSVs, a lab on the excerpt over one,
result dicts from golden rows."""
from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
SHIPPED_CSVS = ("leaderboard_corrected.csv", "tblite_tmax.csv", "leaderboard_legacy_20260426.csv", "leaderboard_by_group.csv")


def make_results_dir(root: Path) -> Path:
    """A results folder holding copies of the shipped CSVs (so tests never touch the repo's DB)."""
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED_CSVS:
        shutil.copy(REPO / "results" / name, results / name)
    return results


@contextmanager
def excerpt_lab(root: Path, specs: tuple[str, ...] = ("reference",)) -> Iterator:
    """A lab's context on the replay excerpt with its own results folder, store and cache under `root` and the
    engines `specs` loaded; its engines are closed on exit."""
    from lab.serve import create_context
    from lab.settings import Settings
    from tests.paths import EXCERPT

    results = make_results_dir(root)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, list(specs))
    ctx.pool.wait()
    try:
        yield ctx
    finally:
        ctx.pool.close_all()


def golden_rows(shared_dir: Path, version: str) -> list[dict]:
    rows = [json.loads(line) for line in (shared_dir / "golden_visible.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["scoring_version"] == version]


def result_from_rows(rows: list[dict], model_path: str, **top: object) -> dict:
    """A result dict in the published schema around per-step rows (aggregate left to the importer)."""
    return {
        "model": model_path.rstrip("/").split("/")[-1],
        "model_path": model_path,
        "model_short": model_path.rstrip("/").split("/")[-1],
        "gpu": "test",
        "eval_path": "golden_visible.jsonl",
        "timestamp": "2026-06-01T00:00:00",
        "load_time_sec": 12.5,
        "gen_time_sec": 3.0,
        "avg_sec_per_step": round(3.0 / max(len(rows), 1), 3),
        "per_step": rows,
        **top,
    }


def write_json(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path
