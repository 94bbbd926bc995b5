"""The what-if panel's handlers without a browser: where edits are kept (shared store vs a public
visitor's session), the answers beside the originals, escaping, and Compare's caches untouched."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from lab.ui.compare.whatif_view import field_choices, keeper_for, run_on_engines, saved_results_html
from lab.whatif import FieldEdit, WhatIf, field_text
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
HOSTILE = "<script>alert(1)</script>\nroot@box:/app# "


def make_ctx(tmp_path, public: bool, shared: bool | None = None):
    from lab.serve import create_context

    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache",
                        replay_path=str(EXCERPT), public=public, whatif_shared=shared)
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    return ctx


def screen_whatif(ctx, key: str = "task-000/2") -> WhatIf:
    step = ctx.replay.by_key[key]
    return WhatIf(key, (FieldEdit("screen", field_text(step, "screen"), HOSTILE),))


def run_all(ctx, keeper, whatif):
    keeper.save_edit(whatif)
    *_, last = run_on_engines(ctx, keeper, whatif, [e for e in ctx.engine_entries() if e.state == "ready"])
    return last


def whatif_rows(ctx) -> int:
    exists = ctx.query("SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'whatif_results'")
    return int(ctx.query("SELECT count(*) AS n FROM whatif_results").iloc[0]["n"]) if exists.iloc[0]["n"] else 0


def test_public_visitors_keep_edits_in_their_session(tmp_path):
    ctx = make_ctx(tmp_path, public=True)
    assert ctx.settings.whatif_shared is False
    try:
        alice, bob = keeper_for(ctx, "alice"), keeper_for(ctx, "bob")
        whatif = screen_whatif(ctx)
        [(original, result, name)] = run_all(ctx, alice, whatif)
        assert name == "reference" and original.f1 == result.f1 == 1.0
        assert keeper_for(ctx, "alice") is alice and [w.edit_id for w in alice.edits()] == [whatif.edit_id]
        assert bob.edits() == [] and bob.results() == []
        assert whatif_rows(ctx) == 0  # nothing reached the shared store
        html = saved_results_html(ctx, alice, whatif.edit_id)
        assert "browser session only" in html and "<script>" not in html and "&lt;script&gt;" in html
    finally:
        ctx.pool.close_all()
        ctx.store.close()


def test_owner_lab_writes_to_the_store_and_leaves_compare_alone(tmp_path):
    ctx = make_ctx(tmp_path, public=False)
    try:
        keeper = keeper_for(ctx, "anyone")
        assert keeper.shared and keeper_for(ctx, "someone-else").edits() == []
        whatif = screen_whatif(ctx)
        [(original, result, _)] = run_all(ctx, keeper, whatif)
        assert whatif_rows(ctx) == 1 and keeper_for(ctx, "someone-else").edits() == [whatif]
        # Compare's cached column is the original answer, not the what-if one
        cached = ctx.views.get(("reference", whatif.step_key))
        assert cached is original and "<script>" not in cached.prompt_text
        html = saved_results_html(ctx, keeper, whatif.edit_id)
        assert "WHAT-IF · edited screen" in html and 'data-side="original"' in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
        assert [c[1] for c in field_choices(ctx, "task-000/2")] == ["system", "task", "turn:0", "turn:1", "turn:2",
                                                                   "screen"]
    finally:
        ctx.pool.close_all()
        ctx.store.close()
