"""Escaping and clipping text into HTML: every piece of model output or replay text goes through `esc`."""
from __future__ import annotations

from html import escape


def esc(text: object) -> str:
    """html.escape for any value (None -> '')."""
    return "" if text is None else escape(str(text), quote=True)


def sim_style(f1: float) -> str:
    """Background colour from red (0) through yellow to green (1)."""
    hue = int(round(max(0.0, min(1.0, f1)) * 120))
    return f"background:hsl({hue},70%,88%)"


LARGE = 1e6  # from here on a number is shown in scientific notation (a 1e308 NLL was 309 digits long)


def fmt(value: float | None, digits: int = 4) -> str:
    """`value` with `digits` decimals ('–' for None); past a million in scientific notation; never '-0.000'
    (a clamped log-probability of 0 negated)."""
    if value is None:
        return "–"
    value = float(value) + 0.0  # -0.0 -> 0.0
    return f"{value:.{digits}e}" if abs(value) >= LARGE else f"{value:.{digits}f}"


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


def clip(text: str, limit: int | None) -> tuple[str, int]:
    """`text` cut to `limit` characters (None: no limit) and how many characters were left out."""
    if limit is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def clip_middle(text: str, head: int, tail: int) -> tuple[str, str, int]:
    """Keep the first `head` and last `tail` characters; returns (head, tail, omitted)."""
    if len(text) <= head + tail:
        return text, "", 0
    return text[:head], text[-tail:], len(text) - head - tail
