"""Triage rough edges: one tag once per step, `^` anchored per command, an empty 'improved' view says why,
plots with no runs give guidance (no -1 axes), long run names are shortened and the legend leaves the title free."""
from __future__ import annotations

import re

import pytest

from lab.errors import LabError
from lab.settings import Settings
from lab.triage import SliceSpec, add_annotation, annotations_for, count_slice, disagreement
from tests.triage.test_triage_common import EXCERPT, run_id, triage_store  # noqa: F401 - fixture
from tests.helpers_store import make_results_dir


def test_same_tag_twice_is_refused(triage_store):  # noqa: F811
    rid = run_id(triage_store, "perturbed")
    key = triage_store.query("SELECT step_key FROM steps WHERE run_id = ? ORDER BY ord LIMIT 1", [rid])["step_key"][0]
    add_annotation(triage_store, rid, key, "dup-check", "first")
    with pytest.raises(LabError, match="already has the tag 'dup-check'"):
        add_annotation(triage_store, rid, key, "Dup-Check ", "again")
    assert [a.tag for a in annotations_for(triage_store, rid, key)].count("dup-check") == 1


def test_regex_caret_is_anchored_per_command(triage_store):  # noqa: F811
    rid = run_id(triage_store, "reference")
    rows = triage_store.query("SELECT step_key, pred_command_units AS u FROM steps WHERE run_id = ?", [rid])
    later = [units[i] for units in rows["u"] for i in range(1, len(units))]
    word = next(w.split()[0] for w in later if w.split() and not any(
        (u[0].split() or [""])[0] == w.split()[0] for u in rows["u"] if len(u)))
    pattern = "^" + re.escape(word) + r"\b"
    per_command = sum(any(re.match(pattern, u) for u in units) for units in rows["u"])
    joined = sum(bool(re.match(pattern, "\n".join(units))) for units in rows["u"])
    assert per_command > joined  # the word only appears after the first command
    spec = SliceSpec(run_ids=[rid], text=pattern, text_regex=True, text_in="commands")
    assert count_slice(triage_store, spec) == per_command


def test_improved_view_empty_says_why(triage_store):  # noqa: F811
    from lab.ui.triage.handlers import diff_message

    ref, bad = run_id(triage_store, "reference"), run_id(triage_store, "perturbed")
    df = disagreement(triage_store, ref, bad, "improved")  # the perturbed run never beats the reference
    assert df.empty
    html = diff_message(len(df), "improved")
    assert 'data-empty="1"' in html and "candidate scores higher" in html


def test_triage_plots_with_no_runs_give_guidance(tmp_path):
    from lab.serve import create_context
    from lab.ui.triage.figures import slice_figures

    results = make_results_dir(tmp_path)
    ctx = create_context(Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                                  cache_dir=tmp_path / "cache", replay_path=str(EXCERPT)), [])
    try:
        for fig in slice_figures(ctx, SliceSpec()):
            assert "no runs in the store yet" in fig.layout.annotations[0].text
            assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False
    finally:
        ctx.pool.close_all()


def test_long_run_names_are_shortened_and_legend_is_below(tmp_path):
    from lab.serve import create_context
    from lab.ui.triage.figures import short_names, slice_figures
    from tests.ui.test_ui_handlers import write_stored_run

    results = make_results_dir(tmp_path)
    write_stored_run(results / "runs" / "long.json", "a-very-long-model-name-from-some-org-" + "y" * 40)
    ctx = create_context(Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                                  cache_dir=tmp_path / "cache", replay_path=str(EXCERPT)), [])
    try:
        _, kinds = slice_figures(ctx, SliceSpec())
        assert all(len(str(x)) <= 28 for t in kinds.data for x in t.x)
        assert kinds.layout.legend.orientation == "h" and kinds.layout.legend.y < 0  # below: never over the title
    finally:
        ctx.pool.close_all()

    long = ["org/" + "x" * 60 + "-checkpoint-100", "org/" + "x" * 60 + "-checkpoint-200", "tinyB"]
    labels = short_names(long)
    assert labels["tinyB"] == "tinyB" and len(set(labels.values())) == 3
    assert all(len(v) <= 28 for v in labels.values())
