"""Escaping and clipping text into HTML: every piece of model output or replay text goes through `esc`."""
from __future__ import annotations

from html import escape

from lab.ui.step_view import clip, clip_middle


def esc(text: object) -> str:
    """html.escape for any value (None -> '')."""
    return "" if text is None else escape(str(text), quote=True)


def sim_style(f1: float) -> str:
    """Background colour from red (0) through yellow to green (1)."""
    hue = int(round(max(0.0, min(1.0, f1)) * 120))
    return f"background:hsl({hue},70%,88%)"


def fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def pre(text: str, limit: int | None, cls: str = "lab-pre") -> str:
    """A <pre> of clipped text with a note on what was left out."""
    shown, omitted = clip(text, limit)
    note = f'<div class="lab-clipped">… {omitted:,} more characters (tick "show all")</div>' if omitted else ""
    return f'<pre class="{cls}">{esc(shown)}</pre>{note}'


def pre_middle(text: str, head: int | None, tail: int | None, cls: str = "lab-pre") -> str:
    """A <pre> keeping the start and the end of a long text (prompts end with what matters)."""
    if head is None or tail is None:
        return f'<pre class="{cls}">{esc(text)}</pre>'
    first, last, omitted = clip_middle(text, head, tail)
    if not omitted:
        return f'<pre class="{cls}">{esc(first)}</pre>'
    gap = f'<span class="lab-clipped">\n… {omitted:,} characters omitted (tick "show all") …\n</span>'
    return f'<pre class="{cls}">{esc(first)}{gap}{esc(last)}</pre>'
