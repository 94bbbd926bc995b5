"""How tables show equiv_f1 columns that are not filled: "equiv pending" (the background filler,
lab.store.equiv_filler, is computing them), "equiv skipped: too large" (a step past the equiv
limits), "equiv needs the replay" (a relative `cd` and no step screen) or "equiv failed", never a
blank or a 0."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from lab.scoring.equiv import NEEDS_REPLAY, SKIPPED
from lab.ui.shell.html_text import esc

STATE_TEXT = {"pending": "equiv pending", "skipped": SKIPPED, "needs_replay": NEEDS_REPLAY, "failed": "equiv failed"}
STEP_STATES = ("pending", "failed")  # run states that hold for every step of the run (skipped is per step)


def mark_equiv_cells(df: pd.DataFrame, columns: Iterable[str], states: pd.Series,
                     which: Iterable[str] = tuple(STATE_TEXT)) -> pd.DataFrame:
    """`df` (object dtype) with `columns` of the rows whose equiv state (`states`, aligned with
    `df`'s rows) is one of `which` (pending, skipped, failed) replaced by that state's text."""
    out = df.astype(object)
    for state, text in ((k, STATE_TEXT[k]) for k in which):
        rows = (states == state).to_numpy()
        if rows.any():
            for column in (c for c in columns if c in out.columns):
                out.loc[rows, column] = text
    return out


def mark_step_reasons(df: pd.DataFrame, columns: Iterable[str], reasons: pd.Series) -> pd.DataFrame:
    """`df` with `columns` of the steps whose equiv was not computed (`reasons`: steps.equiv_skipped,
    aligned with `df`'s rows) replaced by "equiv skipped: too large" or "equiv needs the replay"."""
    out = df.astype(object)
    for text in (SKIPPED, NEEDS_REPLAY):
        rows = reasons.map(lambda r, t=text: isinstance(r, str) and r.startswith(t)).to_numpy(dtype=bool)
        if rows.any():
            for column in (c for c in columns if c in out.columns):
                out.loc[rows, column] = text
    return out


def pending_note(pending: int, where: str = "") -> str:
    """A short muted line: "equiv pending for N runs …" ('' when none)."""
    if not pending:
        return ""
    runs = f"{pending} run{'s' if pending != 1 else ''}"
    return (f'<span class="lab-equiv-pending" data-equiv-pending="{pending}">{esc(STATE_TEXT["pending"])} for '
            f"{runs}: being filled in the background{esc(where)}</span>")
