"""The race table as text (the terminal's view of a race; the Batch tab draws the same standings as HTML):
one line per checkpoint after every round, and the lines that say how to finish a checkpoint's run."""
from __future__ import annotations

import shlex
from typing import Sequence

from lab.sweep.race_book import ELIMINATED, RaceBook, RoundRecord, Standing

HEADER = ("checkpoint", "steps", "score", "Δ vs leader", "race interval", "P(best)", "status")


def _number(value: float | None, sign: bool = False) -> str:
    return "—" if value is None else (f"{value:+.2f}" if sign else f"{value:.2f}")


def status_text(standing: Standing) -> str:
    """"eliminated in round 3", "leader", "racing", "finalist (leader)" …"""
    if standing.status == ELIMINATED:
        return f"eliminated in round {standing.round}"
    return f"{standing.status} (leader)" if standing.leader else standing.status


def standing_cells(standing: Standing) -> list[str]:
    ci = "—" if standing.ci is None else f"[{standing.ci[0]:+.2f}, {standing.ci[1]:+.2f}]"
    p_best = "—" if standing.p_best is None else f"{standing.p_best:.2f}"
    return [standing.name, str(standing.steps), _number(standing.score), _number(standing.delta, sign=True), ci, p_best,
            status_text(standing)]


def round_line(book: RaceBook, record: RoundRecord | None) -> str:
    """What the round did, in one line."""
    if record is None:
        return (f"race: {len(book.names)} checkpoints, {book.plan.rounds} rounds of up to "
                f"{max((len(t) for t in book.plan.tasks), default=0)} tasks ({book.plan.steps} steps each), "
                f"{book.settings.confidence:.0%} family-wise, {book.settings.spending} spending")
    dropped = f"; dropped {', '.join(record.eliminated)}" if record.eliminated else ""
    return (f"round {record.round}/{book.plan.rounds}: {record.steps} steps, {record.fraction:.0%} of the tasks' steps "
            f"seen, pair level {record.level:.2g}; leader {record.leader}{dropped}; {record.racing} racing")


def race_table(standings: Sequence[Standing]) -> str:
    """The standings as an aligned text table."""
    rows = [list(HEADER)] + [standing_cells(s) for s in standings]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) if i in (0, 6) else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip() for row in rows)


def resume_command(spec: str, name: str, replay: str, out_dir: str, options: dict) -> str:
    """The `python -m lab replay --resume` line that completes one checkpoint's run (its checkpoint's
    header must match: the same engine, replay, selection and sampling)."""
    words = ["python", "-m", "lab", "replay", "--resume", "--name", name, "--engine", spec, "--replay", replay,
             "--out", out_dir]
    for flag, value in options.items():
        if value is None or value is False:
            continue
        if isinstance(value, list):
            words += [flag, *map(str, value)]
        else:
            words += [flag] if value is True else [flag, str(value)]
    return " ".join(shlex.quote(w) for w in words)
