"""Compare's equiv_f1 parts: the badge of an equivalent-but-not-equal pair and the column's equiv
F1 labelled "not the published score", from a real stored run on the real excerpt step."""
from lab.data import load_replay
from lab.engines.registry import create_engine
from lab.runs.pipeline import run_steps
from lab.ui.compare.equiv_view import equiv_badge
from lab.ui.compare.render_html import render_column, render_diff
from lab.ui.compare.step_view import UnitMatch, engine_view_from_result
from tests.paths import EXCERPT, TB2LITE

PUBLISHED = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"


def test_stored_answer_shows_equivalent_pairs_and_equiv_f1():
    step = load_replay(str(EXCERPT)).by_key["task-000/0"]  # the screen shows root@…:/app#
    engine = create_engine(f"stored:{PUBLISHED}")
    engine.load()
    try:
        result = run_steps(engine, [step])[0]
    finally:
        engine.close()
    view = engine_view_from_result(engine.spec, engine.name, result)
    # `cd /app/myproject` (predicted) vs `cd myproject` (reference) in /app: equivalent, not equal
    cd_row = next(r for r in view.ref_rows if r.unit == "cd myproject")
    assert cd_row.other_unit == "cd /app/myproject" and cd_row.equiv == "equivalent"
    assert view.equiv.cwd == "/app"
    assert view.equiv.harness_f1 == result.metrics.f1 == view.metrics["command_f1"]  # the published F1, untouched
    assert view.equiv.f1 > view.equiv.harness_f1
    html = render_column(view)
    assert 'data-equiv="equivalent"' in html and "≡ equivalent" in html
    assert "not the published score" in html and f"{view.equiv.f1:.4f}" in html
    assert f'<b>{view.metrics["command_f1"]:.4f}</b>' in html  # the harness F1 is still shown as before


def test_badge_only_for_equivalent_pairs():
    rows = [UnitMatch(0, "ls -al", 0, "ls -la", 0.5, equiv="equivalent"), UnitMatch(1, "b", 1, "a && b", 0.5, equiv="chain_part"),
            UnitMatch(2, "pwd", 2, "pwd", 1.0)]
    html = render_diff(rows, rows)
    assert html.count("lab-equiv-badge") == 2 and "≡ part of a chain" in html
    assert equiv_badge(None) == "" and equiv_badge("nonsense") == ""
