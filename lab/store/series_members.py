"""Place any run in a checkpoint series at a given position (the base model at 0, a run the names do not
recognise, a run moved to another series), or take it out again. Placements live in `series_members`
(series.sql) and override the series a run's name or the published catalogue gives it."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from lab.errors import LabError
from lab.store.db import Store, register_schema

DDL_PATH = Path(__file__).with_name("series.sql")
X_KINDS = ("checkpoint step", "epoch")
MAX_SERIES_NAME = 200
MAX_POSITION = 10**12


register_schema(DDL_PATH)  # every store opened from now on has the table


def ensure_table(store: Store) -> None:
    store.ensure_schema(DDL_PATH)


def placements(store: Store) -> dict[str, tuple[str, int, str]]:
    """run_id -> (series, position, x_kind) of every placed run."""
    ensure_table(store)
    return {str(r): (str(s), int(x), str(k)) for r, s, x, k in
            store.rows("SELECT run_id, series, x, x_kind FROM series_members")}


def series_name(text: object) -> str:
    """A series name as stored: its words joined by single spaces; LabError when empty or too long."""
    series = " ".join(str(text or "").split())
    if not series:
        raise LabError("series name is empty: give the series the run joins")
    if len(series) > MAX_SERIES_NAME:
        raise LabError(f"series name is longer than {MAX_SERIES_NAME} characters")
    return series


def join_series(store: Store, run_id: str, series: str, position: int | float | str,
                x_kind: str = "checkpoint step") -> tuple[str, int, str]:
    """Place run `run_id` in `series` at `position` (replacing an earlier placement of that run);
    LabError naming what is wrong with the input."""
    series = series_name(series)
    shown = repr(position) if len(str(position)) <= 40 else repr(f"{str(position)[:40]}…")
    try:
        x = float(position)
    except (TypeError, ValueError, OverflowError):
        raise LabError(f"position {shown}: give a whole number (the base model: 0)") from None
    if not 0 <= x <= MAX_POSITION or x != int(x):  # NaN and infinities fail the range first
        raise LabError(f"position {shown}: give a whole number from 0 to {MAX_POSITION} (the base model: 0)")
    if x_kind not in X_KINDS:
        raise LabError(f"position kind {x_kind!r}: use one of {', '.join(X_KINDS)}")
    if not store.rows("SELECT 1 FROM runs WHERE run_id = ?", [str(run_id)]):
        raise LabError(f"no run '{run_id}' in the store; pick a run from the list")
    ensure_table(store)
    with store.writes("series"), store.transaction() as cur:
        cur.execute("DELETE FROM series_members WHERE run_id = ?", [str(run_id)])
        cur.execute("INSERT INTO series_members VALUES (?, ?, ?, ?, ?)",
                    [str(run_id), series, int(x), x_kind, datetime.now(timezone.utc).replace(tzinfo=None)])
    return series, int(x), x_kind


def leave_series(store: Store, run_id: str) -> bool:
    """Take a run's placement away (its series comes from its name or the catalogue again); False when it
    had none."""
    ensure_table(store)
    if not store.rows("SELECT 1 FROM series_members WHERE run_id = ?", [str(run_id)]):
        return False
    with store.writes("series"):
        store.execute("DELETE FROM series_members WHERE run_id = ?", [str(run_id)])
    return True
