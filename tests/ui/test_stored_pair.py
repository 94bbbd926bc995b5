"""Compare's run-level block for stored columns (lab.ui.compare.stored_pair): two columns get the pair's
comparison, three or more each against the baseline (the first column unless another is picked) with
simultaneous intervals, and drawing it while the page switches steps never waits on the store lock it holds (a
step switch once hung 3 minutes on it)."""
from __future__ import annotations

import threading

import pytest

from lab.settings import Settings
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("stored-pair")
    results = make_results_dir(root)
    for name, shift, seed in (("base", 0.0, 1), ("better", 0.08, 2), ("same", 0.0, 3)):
        write(results / "runs", name, variant(name, shift=shift, seed=seed))
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    lab = create_context(settings, [])
    yield lab
    lab.pool.close_all()


def drawn(ctx) -> str:
    """stored_pair_html in a thread: a hang (a lock taken twice) fails the test instead of the run."""
    from lab.ui.compare.stored_pair import stored_pair_html

    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(stored_pair_html(ctx, ctx.engine_entries())), daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "stored_pair_html hung"
    return out[0]


def run_id(ctx, name: str) -> str:
    return ctx.query("SELECT run_id FROM runs WHERE model_short = ?", [name])["run_id"][0]


def test_one_two_and_three_stored_columns(ctx):
    ctx.add_stored_run(run_id(ctx, "base"))
    assert drawn(ctx) == ""  # one stored column: nothing to compare
    ctx.add_stored_run(run_id(ctx, "better"))
    pair = drawn(ctx)
    assert 'id="lab-run-delta"' in pair and 'data-verdict="better"' in pair and "303 common steps" in pair
    ctx.add_stored_run(run_id(ctx, "same"))
    many = drawn(ctx)
    assert "simultaneous over 2 comparisons (max-T)" in many
    assert many.count("<li ") == 2 and "against the baseline <b>base</b>" in many


def test_the_baseline_is_a_stored_column_the_first_unless_picked(ctx):
    from lab.ui.compare.stored_pair import run_block

    for name in ("base", "better", "same"):
        ctx.add_stored_run(run_id(ctx, name))
    entries = ctx.engine_entries()
    first = run_block(ctx, entries)
    assert first.baseline == run_id(ctx, "base") and [r for _, r in first.choices][:1] == [first.baseline]
    picked = run_block(ctx, entries, run_id(ctx, "same"))
    assert picked.baseline == run_id(ctx, "same") and "against the baseline <b>same</b>" in picked.html
    assert f'data-run="{run_id(ctx, "base")}"' in picked.html and picked.html.count("<li ") == 2
    assert run_block(ctx, entries, "no-such-run").baseline == first.baseline  # not a column: the first one
