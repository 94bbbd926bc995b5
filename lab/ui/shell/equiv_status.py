"""How tables show equiv_f1 columns that are not filled: "equiv pending" (the background filler,
lab.store.equiv_filler, is computing them), "equiv skipped: too large" (a step past the equiv
limits), "equiv needs the replay" (a relative `cd` and no step screen) or "equiv failed", never a
blank or a 0."""
from __future__ import annotations

from typing import Container, Iterable

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


NOT_IN_REPLAY = "equiv needs this step's screen: not in the replay loaded"


def needs_replay_text(replay_loaded: bool) -> str:
    """What a step that needs a replay screen says: "equiv needs the replay" in a lab without one; in a lab
    with one (--replay, LAB_REPLAY), that its replay does not hold the step (a run of other steps)."""
    return NOT_IN_REPLAY if replay_loaded else NEEDS_REPLAY


def mark_step_reasons(df: pd.DataFrame, columns: Iterable[str], reasons: pd.Series,
                      replay_keys: Container[str] | None = None) -> pd.DataFrame:
    """`df` with `columns` of the steps whose equiv was not computed (`reasons`: steps.equiv_skipped,
    aligned with `df`'s rows) replaced by "equiv skipped: too large" or needs_replay_text. With the step keys of
    the lab's replay (`replay_keys`), a step it holds that was filled without it (by another process) says
    "equiv pending": the background filler computes it again with the replay."""
    out = df.astype(object)
    needs = reasons.map(lambda r: isinstance(r, str) and r.startswith(NEEDS_REPLAY)).to_numpy(dtype=bool)
    held = (df["step_key"].map(lambda k: k in replay_keys).to_numpy(dtype=bool)
            if replay_keys is not None and "step_key" in df.columns else needs & False)
    skipped = reasons.map(lambda r: isinstance(r, str) and r.startswith(SKIPPED)).to_numpy(dtype=bool)
    for rows, text in ((skipped, SKIPPED), (needs & held, STATE_TEXT["pending"]),
                       (needs & ~held, needs_replay_text(replay_keys is not None))):
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
