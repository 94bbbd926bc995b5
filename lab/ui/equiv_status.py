"""How tables show equiv_f1 columns that are not filled yet: "equiv pending" (the background filler,
lab.store.equiv_filler, is computing them) or "equiv failed", never a blank or a 0."""
from __future__ import annotations

from typing import Iterable

import pandas as pd

from lab.ui.html_text import esc

STATE_TEXT = {"pending": "equiv pending", "failed": "equiv failed"}


def mark_equiv_cells(df: pd.DataFrame, columns: Iterable[str], states: pd.Series) -> pd.DataFrame:
    """`df` (object dtype) with `columns` of the rows whose equiv state (`states`, aligned with
    `df`'s rows) is pending or failed replaced by that state's text."""
    out = df.astype(object)
    for state, text in STATE_TEXT.items():
        rows = (states == state).to_numpy()
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
