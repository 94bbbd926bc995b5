"""Compare's sampling panel without Gradio: N answers per engine for one step, and their HTML.

Each engine's block shows the F1 of every sample as dots on a 0–1 strip, the step's figures
(mean ± std, spread, pass@1 and pass@N from `lab.scoring.stability`) and the identical answers
collapsed with their count, most frequent first. Stored runs written with `--samples` show
their stored samples; other engines are sampled on request (seeds S, S+1, …).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from lab.data.step import Step
from lab.engines.base import Sampling
from lab.engines.common import EngineBase
from lab.runs.samples import run_sampled_steps, sampling_for_samples
from lab.scoring.stability import SampleSummary, summarize_samples
from lab.ui.shell.html_text import esc, sim_style

READY, RUNNING, ERROR, NONE = "ready", "running", "error", "none"
MAX_GROUPS = 8  # collapsed answers listed per engine; the rest are counted
UNIT_CHARS = 160  # per command unit in the list of answers
RAW_CHARS = 600  # the example raw output behind a group (in a <details>)
# The panel's own styles travel with it (lab.css stays untouched): about 0.8 kB once per render.
STYLE = """<style>
.lab-samples{border:1px solid var(--border-color-primary,#ddd);border-radius:6px;padding:6px 8px;margin:6px 0}
.lab-samples-head{font-size:.9em;margin-bottom:4px}
.lab-strip{position:relative;margin:4px 10px 4px 6px;border-bottom:2px solid #999;min-width:160px;max-width:520px}
.lab-strip-tick{position:absolute;bottom:-16px;font-size:.7em;color:#888}
.lab-dot{position:absolute;width:10px;height:10px;border-radius:50%;border:1px solid #555}
.lab-answers{border-collapse:collapse;font-size:.85em;margin-top:22px;width:100%;table-layout:fixed}
.lab-answers td,.lab-answers th{border-top:1px solid #eee;padding:2px 6px;vertical-align:top;text-align:left}
.lab-answers th:nth-child(1),.lab-answers th:nth-child(2){width:4.5em}
.lab-answers code{display:inline-block;margin:0 4px 2px 0;padding:0 3px;white-space:pre-wrap;word-break:break-all;
background:rgba(127,127,127,.12);border:1px solid rgba(127,127,127,.3);border-radius:3px}
.lab-count{font-weight:bold;white-space:nowrap}
</style>"""


@dataclass
class SampleSet:
    """One engine's samples of one step (or why there are none)."""

    engine: str
    state: str
    samples: list[dict] = field(default_factory=list)
    sampling: dict | None = None  # temperature, top_p, seed of sample 0; None for stored samples
    source: str = "sampled"  # sampled | stored
    error: str | None = None
    summary: SampleSummary | None = None


def stored_samples(engine: EngineBase, step: Step) -> list[dict]:
    """The samples a `stored:` engine's result file holds for `step` ([] when it has none)."""
    row = engine.rows.get(step.key) or {}
    samples = row.get("samples")
    return samples if isinstance(samples, list) else []


def stored_threshold(engine: EngineBase, default: float) -> float:
    """A stored run's pass threshold (its aggregate's), else `default`."""
    value = (engine.result.get("aggregate") or {}).get("pass_threshold")
    return default if value is None else float(value)


def sample_engine(name: str, engine: EngineBase, step: Step, n: int, sampling: Sampling, seed: int,
                  threshold: float) -> SampleSet:
    """Generate `n` answers of `engine` to `step` (seeds seed…seed+n-1); errors become the set's error."""
    try:
        result = run_sampled_steps(engine, [step], sampling, n=n, seed=seed)[0]
    except Exception as exc:  # noqa: BLE001 - an engine's failure is shown in its block
        return SampleSet(name, ERROR, error=f"{type(exc).__name__}: {exc}")
    samples = result.per_step["samples"]
    errors = [s["error"] for s in samples if s.get("error")]
    info = {"temperature": sampling.temperature, "top_p": sampling.top_p, "seed": seed}
    if errors and len(errors) == len(samples):
        return SampleSet(name, ERROR, samples, info, error=errors[0])
    return SampleSet(name, READY, samples, info, summary=summarize_samples(samples, threshold))


def stored_set(name: str, engine: EngineBase, step: Step, threshold: float) -> SampleSet:
    """The stored samples of a `stored:` engine (state `none` when its file has none for the step)."""
    samples = stored_samples(engine, step)
    if not samples:
        return SampleSet(name, NONE, source="stored")
    try:
        summary = summarize_samples(samples, stored_threshold(engine, threshold))
    except (KeyError, TypeError, ValueError) as exc:  # a hand-edited file: say which, never a traceback
        return SampleSet(name, ERROR, source="stored",
                         error=f"{engine.path or name}: step {step.key} has malformed samples ({exc!r})")
    return SampleSet(name, READY, samples, None, "stored", summary=summary)


def plan_sampling(engine: EngineBase, temperature: float | None, top_p: float | None) -> Sampling:
    """The engine's sampling for N answers (page values, else its preset when it samples, else 0.7/0.95)."""
    return sampling_for_samples(engine.default_sampling, temperature, top_p)


# ---- HTML ---------------------------------------------------------------------------------
def _f(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render_strip(samples: Sequence[dict]) -> str:
    """The F1 of every sample as a dot on a 0–1 track (equal values stack upwards)."""
    seen: dict[int, int] = {}
    dots = []
    for i, s in enumerate(samples):
        f1 = float(s.get("command_f1") or 0.0)
        pos = int(round(f1 * 100))
        level = seen.get(pos, 0)
        seen[pos] = level + 1
        title = f"sample {s.get('sample', i)} · seed {s.get('seed')} · F1 {f1:.4f}"
        dots.append(f'<span class="lab-dot" style="left:calc({pos}% - 5px);bottom:{2 + 7 * min(level, 6)}px;'
                    f'{sim_style(f1)}" title="{esc(title)}"></span>')
    height = 16 + 7 * min(max(seen.values(), default=1) - 1, 6)
    return (f'<div class="lab-strip" style="height:{height}px" role="img" aria-label="F1 of each sample">'
            f'<span class="lab-strip-tick" style="left:0">0</span><span class="lab-strip-tick" style="left:50%">.5</span>'
            f'<span class="lab-strip-tick" style="right:0">1</span>{"".join(dots)}</div>')


def render_groups(summary: SampleSummary) -> str:
    """Identical answers collapsed with their count, most frequent first."""
    rows = []
    for g in summary.groups[:MAX_GROUPS]:
        units = "".join(f"<code>{esc(u[:UNIT_CHARS])}{'…' if len(u) > UNIT_CHARS else ''}</code>"
                        for u in g.units) or '<span class="lab-muted">no command</span>'
        variants = f' · {g.raw_variants} wordings' if g.raw_variants > 1 else ""
        raw = g.example_raw[:RAW_CHARS] + ("…" if len(g.example_raw) > RAW_CHARS else "")
        rows.append(
            f'<tr class="lab-answer"><td class="lab-count">{g.count}×</td>'
            f'<td style="{sim_style(g.command_f1)}">{g.command_f1:.2f}</td>'
            f'<td class="lab-answer-units">{units}<details><summary class="lab-muted">samples '
            f'{", ".join(str(i) for i in g.samples)}{variants}</summary><pre class="lab-pre">{esc(raw)}</pre>'
            f'</details></td></tr>')
    more = len(summary.groups) - MAX_GROUPS
    extra = f'<tr><td colspan="3" class="lab-muted">… {more} more distinct answers</td></tr>' if more > 0 else ""
    return ('<table class="lab-answers"><thead><tr><th>count</th><th>F1</th><th>answer (command units)</th></tr>'
            f'</thead><tbody>{"".join(rows)}{extra}</tbody></table>')


def render_sample_set(s: SampleSet) -> str:
    """One engine's block."""
    head = f"<b>{esc(s.engine)}</b>"
    if s.state == RUNNING:
        return f'<div class="lab-samples">{head} <span class="lab-muted">sampling…</span></div>'
    if s.state == NONE:
        return (f'<div class="lab-samples">{head} <span class="lab-muted">its result file has no samples for this '
                "step (write one with <code>python -m lab replay … --samples N</code>)</span></div>")
    if s.state == ERROR or s.summary is None:
        return f'<div class="lab-samples">{head} <span class="lab-bad">{esc(s.error or "no answers")}</span></div>'
    st, ks = s.summary.stats, s.summary.pass_at_k
    where = ("stored samples" if s.source == "stored" else
             f"T {s.sampling['temperature']:g} · top_p {s.sampling['top_p']:g} · seeds {s.sampling['seed']}–"
             f"{s.sampling['seed'] + st.n - 1}")
    figures = (f"mean F1 <b>{_f(st.f1_mean)}</b> ± {_f(st.f1_std)} · spread {_f(st.spread)} · "
               f"pass@1 {_f(ks[1])} · pass@{st.n} {_f(ks[st.n])} (pass: F1 ≥ {s.summary.threshold:g}) · "
               f"{st.n_distinct} distinct")
    return (f'<div class="lab-samples" data-engine="{esc(s.engine)}"><div class="lab-samples-head">{head} · '
            f'{st.n} samples · <span class="lab-muted">{where}</span><br>{figures}</div>'
            f"{render_strip(s.samples)}{render_groups(s.summary)}</div>")


def render_samples(sets: Sequence[SampleSet]) -> str:
    """Every engine's block for one step ('' when there is nothing to show)."""
    if not sets:
        return ('<p class="lab-muted">No samples for this step yet: press <b>Sample N on all engines</b> '
                "(stored runs written with <code>--samples</code> show theirs here).</p>")
    return STYLE + '<div class="lab-samples-all">' + "".join(render_sample_set(s) for s in sets) + "</div>"
