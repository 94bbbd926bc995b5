"""A lab context with N stored runs as Compare columns (the Compare benchmarks' set-up)."""
from __future__ import annotations

from pathlib import Path

from lab.settings import Settings
from tests.ui.test_ui_handlers import write_stored_run


def stored_lab(root: Path, replay: str, n: int = 4, prefix: str = "stored"):
    """Write `n` stored runs of the replay under `root` and open a lab (loaded) with them as engines."""
    from lab.serve import create_context

    runs = root / "results" / "runs"
    specs = []
    for i in range(n):
        write_stored_run(runs / f"{prefix}{i}.json", f"{prefix}{i}", offset=i)
        specs.append(f"stored:{runs / f'{prefix}{i}.json'}")
    settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=replay)
    ctx = create_context(settings, specs)
    ctx.pool.wait()
    return ctx
