"""What an engine's preset changed and whether it fits its checkpoint, as HTML (the Engines table's engine
cell and a Compare column's prompt audit show the same)."""
from __future__ import annotations

from lab.ui.shell.html_text import esc


def preset_warning_html(warning: str | None) -> str:
    """The one-line warning of a preset on a checkpoint of another family ('' when it fits)."""
    if not warning:
        return ""
    return f'<div class="lab-warn lab-preset-warning" data-preset-warning="1">⚠ {esc(warning)}</div>'


def preset_changes_html(preset: str | None, changes: list | None) -> str:
    """A folded table of what the preset sets against the same SPEC without it (server flags, prompt
    options, contract, sampling, adapter); '' for an engine without a preset."""
    if not preset or changes is None:
        return ""
    if not changes:
        return (f'<div class="lab-muted lab-preset-changes" data-preset-changes="0">preset {esc(preset)} changes '
                "nothing this engine uses: the same settings as without it</div>")
    rows = "".join(
        f'<tr data-change="{esc(c.part)}"><td>{esc(c.part)}</td><td><code>{esc(c.name)}</code></td>'
        f"<td>{esc(c.with_preset)}</td><td>{esc(c.without)}</td></tr>" for c in changes)
    return (f'<details class="lab-preset-changes" data-preset-changes="{len(changes)}"><summary>preset '
            f"{esc(preset)} sets {len(changes)} thing{'s' if len(changes) != 1 else ''} (vs no preset)</summary>"
            '<table class="lab-kv"><tr><th>what</th><th>name</th><th>with the preset</th><th>without</th></tr>'
            f"{rows}</table></details>")
