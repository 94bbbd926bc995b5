"""A paired comparison (lab.analysis.run_pairs.RunComparison) as HTML: the verdict line for the score, the line of
settings the two runs differ in, what would give an interval where there is none, and a small table of every
metric's difference with its 95 % interval and the steps improved, regressed and unchanged. Triage's
baseline vs candidate and Compare's stored columns show the same block."""
from __future__ import annotations

from lab.ui.shell.html_text import esc

VERDICT_CLASS = {"better": "lab-pair-better", "worse": "lab-pair-worse"}


def comparison_html(comparison, headline_metric: str = "score", elem_id: str = "") -> str:
    """The block for one baseline/candidate pair (`comparison` from lab.analysis.run_pairs)."""
    from lab.analysis.run_pairs import delta_text, load_metrics, mde_text, summary_line

    metrics = load_metrics()
    head = comparison.get(headline_metric)
    verdict = head.verdict if head is not None and head.ci is not None else "no interval"
    rows = []
    for name, diff in comparison.differences.items():
        spec = metrics[name]
        if diff is None:
            rows.append(f'<tr data-metric="{esc(name)}"><td>{esc(spec.label)}</td><td colspan="7" class="lab-muted">'
                        f'{esc(comparison.notes.get(name, "not comparable"))}</td></tr>')
            continue
        shown = diff.verdict if diff.ci is not None else diff.note
        rows.append(
            f'<tr data-metric="{esc(name)}"><td>{esc(spec.label)}</td><td>{diff.baseline:.{spec.digits}f}</td>'
            f'<td>{diff.candidate:.{spec.digits}f}</td><td class="lab-pair-delta">{esc(delta_text(diff, spec.digits))}</td>'
            f'<td class="{VERDICT_CLASS.get(diff.verdict, "")}">{esc(shown)}</td><td>{esc(mde_text(diff, name))}</td>'
            f'<td>{diff.improved} / {diff.regressed} / {diff.unchanged}</td><td>{diff.steps}</td></tr>')
    id_attr = f' id="{esc(elem_id)}"' if elem_id else ""
    return (
        f'<div class="lab-pair"{id_attr} data-verdict="{esc(verdict)}">'
        f'<div class="lab-pair-title"><b>{esc(comparison.candidate.name)}</b> vs baseline '
        f'<b>{esc(comparison.baseline.name)}</b></div>'
        f'<div class="lab-pair-line">{esc(summary_line(comparison, headline_metric))}</div>'
        f'{settings_html(comparison.settings)}{hint_html(head)}'
        '<table class="lab-pair-table"><thead><tr><th>metric</th><th>baseline</th><th>candidate</th>'
        '<th>Δ [95 % interval]</th><th>verdict</th><th>detects (80 %)</th><th>improved / regressed / unchanged</th>'
        '<th>steps</th></tr>'
        f'</thead><tbody>{"".join(rows)}</tbody></table>'
        '<div class="lab-muted">Δ = candidate − baseline over the steps both answered; the interval resamples '
        'tasks (a task\'s steps move together), so one step never decides the verdict; detects: the smallest true '
        'difference the interval finds 80 % of the time.</div></div>')


def settings_html(settings) -> str:
    """The one line of settings two runs differ in (`settings` a lab.resultfiles.run_settings.SettingsDiff);
    marked when one of them changes the answers."""
    if settings is None:
        return ""
    cls = "lab-pair-settings lab-pair-mismatch" if settings.changing else "lab-pair-settings lab-muted"
    return f'<div class="{cls}" data-changes-answers="{str(bool(settings.changing)).lower()}">{esc(settings.line())}</div>'


def hint_html(diff) -> str:
    """What would give `diff` its interval, where it has none for too few common steps or tasks ("" else)."""
    from lab.analysis.interval_hint import hint_for

    hint = hint_for(diff)
    return f'<div class="lab-pair-hint lab-muted">{esc(hint)}</div>' if hint else ""
