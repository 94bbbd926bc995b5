"""Issue 27 item 4: while an engine generates, its column shows the seconds and tokens so far (from
the engine's own decoding steps), not only "generating…"."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.mark.slow
def test_a_waiting_column_shows_elapsed_time_and_tokens_so_far(tiny_model_dir, tmp_path, monkeypatch):
    import lab.ui.compare.answers as compare_answers
    from lab.serve import create_context
    from lab.ui.compare.answers import generate_views

    # the app refreshes every second; the tiny model may answer within one on a fast, idle machine
    monkeypatch.setattr(compare_answers, "LIVE_EVERY_S", 0.02)
    from lab.ui.compare.render_html import render_column

    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"transformers:{tiny_model_dir}?max_tokens=400&name=slow"])
    try:
        assert ctx.pool.wait(timeout=300)
        key = ctx.step_keys()[0]
        live = []  # (elapsed, tokens, html) of each refresh while the column waits
        final = None
        for views in generate_views(ctx, key):
            [view] = views
            if view.state == "running" and view.live is not None:
                live.append((view.live.elapsed_s, view.live.tokens, render_column(view)))
            final = view
        assert final.state == "ready" and final.completion_tokens
        assert live, "the answer came before the first refresh: nothing to show"
        assert [e for e, _, _ in live] == sorted(e for e, _, _ in live)
        assert [t for _, t, _ in live] == sorted(t for _, t, _ in live)  # tokens only grow
        assert live[-1][1] > 0 and live[-1][1] <= final.completion_tokens
        elapsed, tokens, html = live[-1]
        assert f"{elapsed:.0f} s · {tokens:,} tokens so far · {tokens / elapsed:.1f} tok/s" in html and "generating…" in html
        assert ctx.pool.get("slow").live_progress().snapshot() is None  # nothing running any more
    finally:
        ctx.pool.close_all()
