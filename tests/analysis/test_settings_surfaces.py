"""Every surface that compares runs shows the settings they differ in beside the Δ, and where there is no
interval what would give one (issue 51; issue 56 item 1): Triage's and Compare's block (lab.ui.shell.paired_html),
Compare with several stored columns, Results against a baseline (lab.analysis.leaderboard) and the series
(lab.analysis.series_judgement). Values from result files are text, escaped where HTML shows them."""
from __future__ import annotations

import copy
import threading

import pytest

from lab.settings import Settings
from lab.analysis.run_pairs import compare_runs
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("settings-surfaces")
    results = make_results_dir(root)
    base = variant("base", seed=1)
    base["sampling"] = {"temperature": 0.0, "dtype": "bfloat16"}
    hot = copy.deepcopy(variant("hot", shift=0.02, seed=2))
    hot["sampling"] = {"temperature": 0.7, "dtype": "bfloat16"}
    odd = variant("odd", seed=3)
    odd["sampling"] = {"temperature": 0.0, "dtype": HOSTILE}
    tiny = variant("tiny", seed=4, steps=10)
    tiny["sampling"] = {"temperature": 0.0, "dtype": "bfloat16"}
    for name, data in (("base", base), ("hot", hot), ("odd", odd), ("tiny", tiny)):
        write(results / "runs", name, data)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    lab = create_context(settings, [])
    yield lab
    lab.pool.close_all()


def rid(ctx, name: str) -> str:
    return ctx.query("SELECT run_id FROM runs WHERE model_short = ?", [name])["run_id"][0]


def block(ctx, a: str, b: str) -> str:
    from lab.ui.shell.paired_html import comparison_html

    ids = rid(ctx, a), rid(ctx, b)  # before the lock: ctx.query takes it too
    with ctx.store_session() as store:
        return comparison_html(compare_runs(store, *ids, resamples=500))


def test_triage_and_compare_blocks_show_the_settings_line(ctx):
    hot = block(ctx, "base", "hot")
    assert 'class="lab-pair-settings lab-pair-mismatch" data-changes-answers="true"' in hot
    assert "settings differ: temperature 0 vs 0.7 (changes answers)" in hot
    odd = block(ctx, "base", "odd")
    assert "dtype bfloat16 vs &lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in odd and "<img" not in odd
    assert 'data-changes-answers="false"' in odd  # a dtype is shown, it changes no answer
    same = block(ctx, "base", "base")
    assert "settings: no difference recorded" in same and "lab-pair-hint" not in same


def test_too_few_steps_say_what_would_give_an_interval(ctx):
    tiny = block(ctx, "base", "tiny")
    assert 'class="lab-pair-hint lab-muted"' in tiny
    assert "20 more common steps and 3 more tasks" in tiny and "python -m lab data download" in tiny
    assert "--samples" in tiny and "python -m lab demo" in tiny


def test_compare_with_several_stored_columns(ctx):
    from lab.ui.compare.stored_pair import stored_pair_html

    for name in ("base", "hot", "odd", "tiny"):
        ctx.add_stored_run(rid(ctx, name))
    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(stored_pair_html(ctx, ctx.engine_entries())), daemon=True)
    worker.start()
    worker.join(timeout=300)
    html = out[0]
    assert html.count("<li ") == 3
    assert '<span class="lab-pair-mismatch">settings: ⚠ temperature 0 vs 0.7</span>' in html
    assert "settings: dtype bfloat16 vs &lt;img" in html and "<img" not in html
    assert "lab-pair-hint" in html and "to get an interval" in html


def test_results_against_a_baseline(ctx):
    from lab.store import queries
    from lab.analysis.leaderboard import SETTINGS_COLUMN, with_comparisons

    base = rid(ctx, "base")
    with ctx.store_session() as store:
        frame = queries.leaderboard(store, first56_only=False, include_runs=True, order="score")
        out, note = with_comparisons(store, frame, base, resamples=500)
    cells = dict(zip(out["name"].astype(str), out[SETTINGS_COLUMN]))
    assert cells["base"] == "baseline" and cells["hot"] == "⚠ temperature 0 vs 0.7"
    assert cells["odd"] == f"dtype bfloat16 vs {HOSTILE}"  # a table cell: the Dataframe shows text, not HTML
    tiny = next(v for k, v in cells.items() if k.startswith("tiny"))
    assert tiny.startswith("⚠ replay steps (no sha256 recorded) 303 steps · ") and " vs 10 steps · " in tiny
    assert "to get an interval: 20 more common steps and 3 more tasks" in note
    assert note.count("to get an interval") == 1  # one hint for the table
    published = out[out["run_id"].isna()][SETTINGS_COLUMN]
    assert set(published) == {"no per-step data"}


def test_the_series_table_and_notes(ctx):
    from lab.store.series_members import join_series
    from lab.store.series import series_frame
    from lab.analysis.series_judgement import series_stats, series_table

    ids = [(rid(ctx, name), at) for name, at in (("base", 0), ("hot", 1), ("tiny", 2))]
    with ctx.store_session() as store:
        for run_id, at in ids:
            join_series(store, run_id, "demo-series", at)
        stats = series_stats(store, "demo-series", resamples=500)
    table = series_table(stats)
    whole = table[table["steps of"] == "all steps"]
    # the run of 10 steps is never ranked with the 303-step ones: it forms "demo-series [10/303 steps]" apart
    assert list(whole["settings vs first"]) == ["first point", "⚠ temperature 0 vs 0.7"]
    with ctx.store_session() as store:
        apart = series_frame(store, min_runs=1)
    assert "demo-series [10/303 steps]" in set(apart["series"])
    assert any("settings that differ from the first point" in n and "temperature 0 vs 0.7" in n for n in stats.notes)


def test_results_without_a_baseline_say_what_would_rank_the_runs(tmp_path):
    """On the excerpt every lab run has fewer than 30 steps: the per-step rank column cannot rank them, and the
    line under the table says what would."""
    from lab.store import queries
    from lab.analysis.leaderboard import TIES_COLUMN, with_comparisons
    from lab.store.opening import open_store

    results = make_results_dir(tmp_path)
    for name, seed in (("small-a", 1), ("small-b", 2)):
        write(results / "runs", name, variant(name, seed=seed, steps=14))
    with open_store(tmp_path / "lab.duckdb", results) as store:
        frame = queries.leaderboard(store, first56_only=False, include_runs=True, order="score")
        out, note = with_comparisons(store, frame, None, resamples=500)
    ranks = set(out[out["run_id"].notna()][TIES_COLUMN])
    assert ranks == {"no ranking: fewer than 30 steps or 5 tasks"}
    assert "to get an interval: 16 more common steps and 3 more tasks" in note and "python -m lab demo" in note
