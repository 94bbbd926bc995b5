"""The edited prompt against the original: a unified diff (text) and a compact escaped HTML view."""
from __future__ import annotations

import difflib
from html import escape

CONTEXT_LINES = 2
MAX_DIFF_LINES = 400  # the HTML view stops here (the text patch is complete)


def unified_diff(original: str, edited: str, context: int = CONTEXT_LINES,
                 names: tuple[str, str] = ("original", "what-if")) -> str:
    """A unified diff (difflib) of two prompt texts; empty when they are equal."""
    lines = difflib.unified_diff(original.splitlines(keepends=True), edited.splitlines(keepends=True),
                                 fromfile=names[0], tofile=names[1], n=context)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def diff_stats(original: str, edited: str) -> tuple[int, int]:
    """(lines added, lines removed) from `original` to `edited`."""
    added = removed = 0
    for line in difflib.ndiff(original.splitlines(), edited.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return added, removed


def _inline(old: str, new: str) -> tuple[str, str]:
    """Two changed lines with the changed characters wrapped in <del>/<ins> (escaped)."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    a, b = [], []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            a.append(escape(old[i1:i2]))
            b.append(escape(new[j1:j2]))
            continue
        if i2 > i1:
            a.append(f"<del>{escape(old[i1:i2])}</del>")
        if j2 > j1:
            b.append(f"<ins>{escape(new[j1:j2])}</ins>")
    return "".join(a), "".join(b)


def diff_html(original: str, edited: str, context: int = CONTEXT_LINES, max_lines: int = MAX_DIFF_LINES) -> str:
    """Changed hunks only, one row per line (`-` removed, `+` added, ` ` context); a removed line
    followed by its replacement gets character-level marks. Every text is HTML-escaped."""
    if original == edited:
        return '<div class="lab-muted lab-whatif-same">the edit does not change this prompt</div>'
    old_lines, new_lines = original.splitlines(), edited.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    rows: list[str] = []
    for group in matcher.get_grouped_opcodes(context):
        i0, j0 = group[0][1] + 1, group[0][3] + 1
        rows.append(f'<div class="lab-dl lab-dl-hunk">@@ line {i0} → {j0} @@</div>')
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                rows += [f'<div class="lab-dl lab-dl-ctx"> {escape(t)}</div>' for t in old_lines[i1:i2]]
                continue
            old, new = old_lines[i1:i2], new_lines[j1:j2]
            if op == "replace" and len(old) == len(new):
                pairs = [_inline(o, n) for o, n in zip(old, new)]
                old, new = [p[0] for p in pairs], [p[1] for p in pairs]
            else:
                old, new = [escape(t) for t in old], [escape(t) for t in new]
            rows += [f'<div class="lab-dl lab-dl-del">-{t}</div>' for t in old]
            rows += [f'<div class="lab-dl lab-dl-add">+{t}</div>' for t in new]
    more = len(rows) - max_lines
    if more > 0:
        rows = rows[:max_lines] + [f'<div class="lab-dl lab-clipped">… {more} more diff lines</div>']
    added, removed = diff_stats(original, edited)
    head = f'<div class="lab-subhead">prompt diff · +{added} −{removed} lines</div>'
    return f'{head}<div class="lab-whatif-diff">{"".join(rows)}</div>'


def patch_html(patch: str, max_lines: int = MAX_DIFF_LINES) -> str:
    """A stored unified diff (`unified_diff`'s text) as the same escaped rows as `diff_html`."""
    if not patch:
        return '<div class="lab-muted lab-whatif-same">the edit does not change this prompt</div>'
    rows = []
    for line in patch.splitlines():
        if line.startswith(("---", "+++")):
            continue
        cls = {"@": "lab-dl-hunk", "-": "lab-dl-del", "+": "lab-dl-add"}.get(line[:1], "lab-dl-ctx")
        rows.append(f'<div class="lab-dl {cls}">{escape(line)}</div>')
    more = len(rows) - max_lines
    if more > 0:
        rows = rows[:max_lines] + [f'<div class="lab-dl lab-clipped">… {more} more diff lines</div>']
    added = sum(1 for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in patch.splitlines() if line.startswith("-") and not line.startswith("---"))
    head = f'<div class="lab-subhead">prompt diff · +{added} −{removed} lines</div>'
    return f'{head}<div class="lab-whatif-diff">{"".join(rows)}</div>'
