"""Which checkpoint to pick: each checkpoint of a series gets its P(best) and expected regret (the all-steps rows
of `results series show`, the lead sentence, the plot's P(best) row), and the one series plot (Triage, Results'
`checkpoint_series`) draws intervals on the checkpoints' own steps, several series as lines with theirs."""
from __future__ import annotations

import io
import math
from contextlib import redirect_stdout

import pandas as pd
import pytest

from lab.cli import main
from lab.store.opening import open_store
from lab.figures.plots import PLOTS
from lab.figures.series import series_stats_figure
from lab.analysis.series_judgement import ALL_STEPS, lead_text, series_stats, series_table
from tests.helpers_paired import variant, write
from tests.helpers_store import make_results_dir

RESAMPLES = 1000
STEPS = (100, 150, 200, 300)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("series-best")
    results = make_results_dir(root)
    for step in STEPS:  # the last checkpoint clearly the best
        shift = 0.12 if step == 300 else 0.01 * (step // 100)
        write(results / "runs", f"checkpoint-{step}", variant(f"checkpoint-{step}", shift=shift, seed=step,
                                                               model_path=f"/train/myrun/checkpoint-{step}"))
    for step in (1, 2):
        write(results / "runs", f"other-checkpoint-{step}", variant(f"other-checkpoint-{step}", seed=10 + step,
                                                                     model_path=f"/train/other/checkpoint-{step}"))
    store = open_store(root / "lab.duckdb", results)
    yield store, root, results
    store.close()


def test_the_all_steps_rows_have_p_best_and_regret(lab):
    store, _, _ = lab
    stats = series_stats(store, "myrun", resamples=RESAMPLES)
    table = series_table(stats)
    whole = table[table["steps of"] == ALL_STEPS]
    p = whole["p_best"].astype(float)
    assert math.isclose(p.sum(), 1.0, abs_tol=0.01) and whole.loc[p.idxmax(), "position"] == "step 300"
    assert (whole["expected_regret"].astype(float) >= 0).all()
    assert (table.loc[table["steps of"] != ALL_STEPS, "p_best"] == "").all()
    assert whole["detectable Δ score (80 %)"].iloc[1:].astype(float).gt(0).all()
    assert "step 300: P(best) " in lead_text(stats) and "expected regret" in lead_text(stats)


def test_the_cli_shows_them(lab):
    _, root, results = lab
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["results", "--db", str(root / "lab.duckdb"), "--results", str(results),
                     "series", "show", "myrun"]) == 0
    frame = pd.read_csv(io.StringIO("\n".join(l for l in out.getvalue().splitlines() if not l.startswith("#"))))
    assert {"p_best", "expected_regret"} <= set(frame.columns)
    assert frame.loc[frame["steps of"] == ALL_STEPS, "p_best"].notna().all()
    assert "P(best)" in out.getvalue()


def test_one_plot_on_the_checkpoints_own_steps_with_intervals_and_p_best(lab):
    store, _, _ = lab
    fig = series_stats_figure(series_stats(store, "myrun", resamples=RESAMPLES))
    best = next(t for t in fig.data if t.meta == "p_best")
    assert list(best.x) == list(STEPS) and math.isclose(sum(best.y), 1.0, abs_tol=0.01)
    assert list(fig.layout.xaxis3.tickvals) == list(STEPS) and list(fig.layout.xaxis3.ticktext) == [str(s) for s in STEPS]
    one = PLOTS["checkpoint_series"](store, False, name_filter="myrun")
    assert any(t.meta == "delta" and t.error_y.array is not None for t in one.data)
    both = PLOTS["checkpoint_series"](store, False)
    lines = [t for t in both.data if t.meta in ("myrun", "other")]
    assert len(lines) == 2 and all(t.error_y.visible for t in lines)
    assert "P(best)" in lines[0].text[-1] and list(both.layout.xaxis.tickvals) == [1, 2, *STEPS]
    assert "published_series" not in PLOTS
