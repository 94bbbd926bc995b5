"""Pure view-model and HTML functions of the Compare view (hand-made data, no server)."""
from __future__ import annotations

from lab.data.step import Step
from lab.scoring.action import ParsedAction
from lab.ui.shell.html_text import clip, clip_middle
from lab.ui.compare.render_html import render_column, render_columns, render_context, render_diff, render_f1_gap
from lab.ui.compare.step_view import (
    ERROR,
    EngineView,
    UnitMatch,
    alignment_rows,
    build_step_view,
    engine_view_state,
    f1_gap,
)

EVIL = '<script>alert("x")</script>'


def make_step() -> Step:
    messages = ({"role": "user", "content": "Task: fix it"}, {"role": "assistant", "content": "{}"},
                {"role": "user", "content": "root@box:/app# " + EVIL})
    return Step("task-009", 9, 2, 5, False, "x/security", "security", messages, "flat", '{"commands": []}')


def ready_view(name: str, f1: float, pred: list[str], ref: list[str]) -> EngineView:
    view = EngineView(spec=f"stored:{name}.json", name=name, state="ready", raw_output=EVIL, prompt_text="P" * 20000,
                      prompt_status="chat_template", prompt_tokens=1234,
                      parsed=ParsedAction(False, False, False, None, pred, failure="no JSON object", units_from_fallback=True),
                      pred_units=pred, metrics={"first_cmd_exact": 0.0, "command_precision": f1,
                                                "command_recall": f1, "command_f1": f1})
    view.ref_rows, view.pred_rows = alignment_rows(pred, ref)
    return view


def test_alignment_rows_mark_unmatched_units_both_ways():
    ref_rows, pred_rows = alignment_rows(["ls -la", "rm -rf /tmp/x"], ["ls -la", "pwd"])
    assert [(r.unit, r.other_unit, r.f1) for r in ref_rows] == [("ls -la", "ls -la", 1.0), ("pwd", None, 0.0)]
    assert not ref_rows[1].matched and not pred_rows[1].matched


def test_f1_gap_names_the_best_and_worst_engine():
    views = [ready_view("a", 0.5, [], []), ready_view("b", 0.9, [], []), engine_view_state("c", "c", ERROR, "boom")]
    gap = f1_gap(views)
    assert (gap.best, gap.worst, gap.gap) == ("b", "a", 0.4)
    html = render_f1_gap(gap)
    assert "lab-best" in html and "lab-worst" in html and "0.4000" in html


def test_engines_with_the_same_f1_tie_and_show_no_gap():
    """Issue 41: "largest gap 0.0000: g-inproc vs g-inproc" for three engines with one F1."""
    views = [ready_view(n, 0.1421, [], []) for n in ("g-inproc", "g-vllm", "g-serve")]
    gap = f1_gap(views)
    assert gap.tie and (gap.best, gap.worst, gap.gap) == (None, None, 0.0)
    html = render_f1_gap(gap)
    assert "no gap: the 3 engines tie at <b>0.1421</b>" in html
    assert "largest gap" not in html and "lab-best" not in html and "lab-worst" not in html
    assert not f1_gap(views[:1]).tie  # one engine: nothing to compare
    assert f1_gap([ready_view("a", 0.14214, [], []), ready_view("b", 0.14206, [], [])]).tie  # equal as shown


def test_untrusted_text_is_escaped_everywhere():
    step = make_step()
    view = ready_view("m", 0.25, [EVIL, "ls"], ["ls", "cat f"])
    html = render_column(view) + render_context(build_step_view(step, [view], None))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_diff_colours_matches_and_lists_unmatched_predictions():
    ref_rows = [UnitMatch(0, "ls -la", 0, "ls -la", 1.0), UnitMatch(1, "pwd", None, None, 0.0)]
    pred_rows = [UnitMatch(0, "ls -la", 0, "ls -la", 1.0), UnitMatch(1, "echo hi", None, None, 0.0)]
    html = render_diff(ref_rows, pred_rows)
    assert "hsl(120," in html and 'class="lab-unmatched"' in html and "missed" in html
    assert "predicted units matching no reference unit (1)" in html and "echo hi" in html


def test_long_texts_are_clipped_unless_show_all():
    view = ready_view("m", 0.5, ["ls"], ["ls"])
    view.raw_output = "x" * 50_000
    assert len(render_column(view)) < 30_000
    assert len(render_column(view, full=True)) > 50_000
    assert clip("abcdef", 4) == ("abcd", 2)
    assert clip_middle("abcdefghij", 2, 3) == ("ab", "hij", 5)


def test_error_column_and_empty_state_explain_themselves():
    html = render_column(engine_view_state("stored:x.json", "x", ERROR, "step task-000/3 is not in x.json"))
    assert 'data-state="error"' in html and "generation failed" in html and "not in x.json" in html
    assert "Add one in the <b>Engines</b> tab" in render_columns([])
