"""Run names in a runs folder: never a `stored:` engine's own input file, never a finished run's file."""
from __future__ import annotations

from pathlib import Path

from lab.engines.common import EngineBase
from lab.runs.claims import partial_path
from lab.security.safe_files import entry_exists, link_problem


def safe_run_name(engine: EngineBase, out_dir: Path, wanted: str | None) -> str:
    """The run's file stem: `wanted` or the engine's name, never the result file a `stored:` engine
    reads its answers from (a batch must not overwrite its own input)."""
    from lab.runs.replay import run_file_name

    stem = run_file_name(engine, wanted)
    source = engine.path  # the result file a stored run answers from; None for the other kinds
    if source is not None and Path(source).resolve() == (out_dir / f"{stem}.json").resolve():
        stem = f"{stem}-replay"
    return stem


def finished_run_file(out_dir: Path, stem: str) -> Path | None:
    """The result file of a finished run named `stem`: a regular file, not a link (None when there is none, or it
    is still resumable)."""
    final = out_dir / f"{stem}.json"
    if link_problem(final) is not None or not final.is_file():
        return None
    return None if entry_exists(partial_path(out_dir, stem)) else final

