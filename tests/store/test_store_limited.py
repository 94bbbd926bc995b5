"""Issue 56: a run whose steps were limited on purpose (--limit, the training callback's limit=) is whole for its
selection: "[limited to 2 steps]" in Results, the plots and Triage, coverage 1, never "[partial 2/14]"."""
from __future__ import annotations

import json

import pytest

from lab.resultfiles.files import write_result_file
from lab.scoring.aggregate import aggregate_scores
from lab.settings import Settings
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_a_limited_run_says_limited_everywhere_and_a_short_one_stays_partial(tmp_path):
    from lab.serve import create_context
    from lab.ui.results.tab import draw_plot, leaderboard_frame
    from lab.ui.triage.filters import load_choices

    results = make_results_dir(tmp_path)
    whole = write_stored_run(results / "runs" / "base.json", "base")
    rows = whole["per_step"][:2]
    limited = {**json.loads(json.dumps(whole)), "model": "lim", "model_short": "lim", "model_path": "lim",
               "per_step": rows, "aggregate": aggregate_scores(rows), "replay_steps": 14,
               "selection": {"mode": "corrected", "tasks": None, "limit": 2, "steps": 2}}
    write_result_file(results / "runs" / "lim.json", limited)
    # the same two steps with no selection recorded (an older file): partial of its 14-step replay, as before
    short = {k: v for k, v in {**limited, "model": "short", "model_short": "short", "model_path": "short"}.items()
             if k != "selection"}
    write_result_file(results / "runs" / "short.json", short)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [])
    try:
        runs = ctx.store.query("SELECT display_name, total_steps, coverage, partial, selected_steps FROM runs "
                               "ORDER BY display_name").set_index("display_name")
        assert (runs.loc["lim", "total_steps"], runs.loc["lim", "coverage"], bool(runs.loc["lim", "partial"])) == \
            (2, 1.0, False) and runs.loc["lim", "selected_steps"] == 2
        assert bool(runs.loc["short", "partial"]) and runs.loc["short", "total_steps"] == 14
        names = list(leaderboard_frame(ctx, False).query("source == 'run'")["name"])
        assert "lim [limited to 2 steps]" in names and "short [partial 2/14]" in names
        assert not any("lim [partial" in n for n in names)
        buckets = json.dumps(draw_plot(ctx, "by_bucket", False).to_plotly_json(), default=str)
        assert "limited to 2 steps]" in buckets and "partial 2/14]" in buckets
        labels = [label for label, _ in load_choices(ctx).runs]
        assert any(label.startswith("lim · ") and label.endswith(" · limited to 2 steps") for label in labels), labels
        assert any(label.startswith("short · ") and label.endswith("2/14 steps partial") for label in labels), labels
    finally:
        ctx.pool.close_all()
