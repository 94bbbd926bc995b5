"""An answer shaded by token confidence, and the first token where two columns' answers part.

Presentation only: the log-probabilities come with each answer (lab.engines.logprobs); here they become
spans whose shade grows as the token's probability falls, with the top alternatives on hover, and a
mark on the first token where a column's answer leaves the first other column's that has them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from lab.engines.logprobs import first_parting, logprob_settings
from lab.ui.shell.html_text import esc

MAX_TOKENS_SHOWN = 2048  # past this the plain raw output says it all


@dataclass
class Parting:
    """Where a column's answer parts from another's: the token index, and both sides' token and probability."""

    other: str
    index: int
    mine: tuple[str, float] | None
    theirs: tuple[str, float] | None


def mark_partings(views: Sequence) -> None:
    """Set `view.parting` on every column with log-probabilities against the first other such column."""
    with_lp = [v for v in views if v.logprobs is not None and v.logprobs.tokens]
    for view in views:
        view.parting = None
    if len(with_lp) < 2:
        return
    base = with_lp[0]
    for view in with_lp:
        other = with_lp[1] if view is base else base
        index = first_parting(view.logprobs.tokens, other.logprobs.tokens)
        if index is None:
            continue

        def side(lp, i):
            return (lp.tokens[i], math.exp(lp.logprobs[i])) if i < len(lp.tokens) else None

        view.parting = Parting(other.name, index, side(view.logprobs, index), side(other.logprobs, index))


def _hover(token: str, lp: float, top: list[tuple[str, float]]) -> str:
    alternatives = ", ".join(f"{t!r} {math.exp(v):.3f}" for t, v in top)
    return f"p={math.exp(lp):.3f} · {token!r}" + (f" · top: {alternatives}" if alternatives else "")


def _parting_note(parting: Parting) -> str:
    mine = f"{parting.mine[0]!r} (p={parting.mine[1]:.3f})" if parting.mine else "the end"
    theirs = f"{parting.theirs[0]!r} (p={parting.theirs[1]:.3f})" if parting.theirs else "its end"
    return f"parts from {parting.other} at token {parting.index}: here {mine}, there {theirs}"


def render_confidence(view) -> str:
    """The answer token by token, shaded by (1 − probability), or "not recorded"."""
    lp = view.logprobs
    if lp is None or not lp.tokens:
        why = view.logprobs_error
        return ('<div class="lab-muted" data-logprobs="none">token log-probabilities: not recorded'
                f'{f" · {esc(why)}" if why else ""}</div>')
    low = math.log(logprob_settings()["low_confidence"])
    parting = view.parting
    spans = []
    for i, (token, value) in enumerate(zip(lp.tokens[:MAX_TOKENS_SHOWN], lp.logprobs)):
        shade = min(1.0, max(0.0, 1.0 - math.exp(value)))
        classes = "lab-tok" + (" lab-tok-low" if value < low else "")
        title = _hover(token, value, lp.top[i] if i < len(lp.top) else [])
        if parting is not None and parting.index == i:
            classes += " lab-tok-part"
            title = f"{_parting_note(parting)} · {title}"
        spans.append(f'<span class="{classes}" style="background:rgba(240,120,0,{shade * 0.85:.2f})" '
                     f'title="{esc(title)}">{esc(token)}</span>')
    more = len(lp.tokens) - MAX_TOKENS_SHOWN
    tail = f'<div class="lab-muted">… {more:,} more tokens</div>' if more > 0 else ""
    summary = lp.summary()
    mean_p = math.exp(summary["lp_mean"])
    note = (f'<div class="lab-muted lab-part-note" data-parting="{parting.index}">{esc(_parting_note(parting))}</div>'
            if parting is not None else "")
    return (f'<div class="lab-muted">mean token probability {mean_p:.3f} (geometric) · {summary["lp_low_tokens"]} of '
            f'{summary["lp_tokens"]} tokens below p={logprob_settings()["low_confidence"]:g} · hover a token for its '
            f'top alternatives</div>{note}<div class="lab-pre lab-conf" data-logprobs="{len(lp.tokens)}">'
            f'{"".join(spans)}</div>{tail}')
