"""Triage's baseline and candidate take a typed run name (issue: a name Triage did not find left its preselected
run in place, and it compared that run with itself: 0.00 [0.00, 0.00]). A typed id or name is found; one that
is not says the run is not found; the same run twice is refused; the two pickers start on two runs."""
from __future__ import annotations

import pytest

from lab.errors import LabError
from lab.serve import create_context
from lab.settings import Settings
from lab.ui.triage import handlers as h
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = tmp_path_factory.mktemp("triage-pick")
    results = make_results_dir(root)
    for i, name in enumerate(("tiny-base", "tiny-samples")):
        write_stored_run(results / "runs" / f"{name}.json", name, offset=i)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    context = create_context(settings, [])
    yield context
    context.store.close()


def ids(ctx) -> dict[str, str]:
    return {name: rid for rid, name in ctx.store.rows("SELECT run_id, display_name FROM runs")}


def test_a_typed_name_or_id_is_found(ctx):
    runs = ids(ctx)
    assert h.picked_pair(ctx, "tiny-base", runs["tiny-samples"]) == (runs["tiny-base"], runs["tiny-samples"])
    assert h.picked_pair(ctx, " TINY-BASE ", "tiny-samples.json") == (runs["tiny-base"], runs["tiny-samples"])


@pytest.mark.parametrize("base, cand, message", [
    ("tiny-base", "tiny", "candidate 'tiny': no run of that id or name is in the store"),
    ("nosuch", "tiny-base", "baseline 'nosuch': no run"),
    ("x" * 10_000, "tiny-base", "baseline '" + "x" * 80 + "…': no run"),
    ("tiny-base", "' OR 1=1 --", "no run of that id or name"),
    ("tiny-base", "tiny-base", "the same run"),
    ("", "tiny-base", "pick a baseline and a candidate"),
])
def test_a_name_not_found_or_the_same_run_twice_is_said(ctx, base, cand, message):
    with pytest.raises(LabError) as caught:
        h.picked_pair(ctx, base, cand)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_comparison_never_runs_a_run_against_itself(ctx):
    with pytest.warns(UserWarning, match="the same run"):
        out = h.compare_pair(ctx, "tiny-base", "tiny-base", "all")
    assert all(isinstance(o, dict) and o.get("__type__") == "update" and len(o) == 1 for o in out)  # nothing shown
    table, note, header, _ = h.compare_pair(ctx, "tiny-base", "tiny-samples", "all")
    assert len(table) and "tiny-base" in header and "tiny-samples" in header


def test_the_pickers_start_on_two_runs(ctx):
    from lab.ui.triage.filters import load_choices
    from lab.ui.triage.tab import pair_panel

    import gradio as gr

    with gr.Blocks():
        panel = pair_panel(load_choices(ctx))
    assert panel.baseline.value and panel.candidate.value and panel.baseline.value != panel.candidate.value
