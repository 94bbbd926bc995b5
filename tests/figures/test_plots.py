"""Plot functions: each figure's traces carry the data of the query result (not pixels)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from lab.store import import_path, open_store
from lab.figures import plots as P
from lab.store import queries as q
from tests.helpers_store import make_results_dir, write_json


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import bench.synthetic as synthetic

    root = tmp_path_factory.mktemp("plots")
    results = make_results_dir(root)
    # synthetic tasks have no replay, so a relative `cd` would leave equiv unknowable ("equiv needs
    # the replay", no point to draw): the fixture's directories are all absolute
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(synthetic, "DIRS", tuple(d for d in synthetic.DIRS if d.startswith("/")))
        made = synthetic.make_results(n_runs=2, n_steps=30, seed=1)
    for i, result in enumerate(made):
        write_json(results / "runs" / f"syn{i}.json", result)
    with open_store(root / "lab.duckdb", results) as s:
        yield s


def _points(fig: go.Figure, skip_meta: tuple[str, ...] = ("pareto", "iso-f1")) -> list[tuple]:
    out = []
    for tr in fig.data:
        if tr.meta in skip_meta:
            continue
        out += list(zip(tr.text, tr.x, tr.y))
    return out


def test_leaderboard_bars_follow_the_56_or_116_choice(store):
    df56 = q.leaderboard(store, first56_only=True, include_runs=False)
    fig = P.leaderboard_figure(df56)
    bars = {label: x for tr in fig.data for label, x in zip(tr.y, tr.x)}
    assert len(bars) == 56 and bars["LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-2Epoch-FullFT-SameCount"] == 39.52
    assert "56 published" in fig.layout.title.text
    fig_all = P.leaderboard_figure(q.leaderboard(store, first56_only=False, include_runs=True))
    labels = [label for tr in fig_all.data for label in tr.y]
    assert len(labels) == 118 and "+ 2 runs" in fig_all.layout.title.text
    order = list(fig_all.layout.yaxis.categoryarray)
    scores = dict(zip([l for tr in fig_all.data for l in tr.y], [x for tr in fig_all.data for x in tr.x]))
    assert [scores[l] for l in order] == sorted(scores[l] for l in order)  # best bar on top
    hatched = {l for tr in fig_all.data for l, pat in zip(tr.y, tr.marker.pattern.shape) if pat == "/"}
    assert len(hatched) == 4 and all("DeepSeek-V4-Pro" in l for l in hatched)
    for tr in fig_all.data:
        assert tr.marker.color == P.family_color(tr.name)


def test_score_vs_params_is_log_with_symbols_by_training(store):
    df = q.score_vs_params(store, include_runs=False)
    fig = P.score_vs_params_figure(df)
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    methods = set(df["training_method"])
    for tr in fig.data:
        family, method = tr.name.split(" · ")
        assert tr.marker.symbol == P.training_symbol(method) and tr.marker.color == P.family_color(family)
    assert len({P.training_symbol(m) for m in methods}) == len(methods)
    total = {(t, x) for tr in fig.data if tr.xaxis == "x" for t, x in zip(tr.text, tr.x)}
    active = {(t, x) for tr in fig.data if tr.xaxis == "x2" for t, x in zip(tr.text, tr.x)}
    assert ("Qwen/Qwen3.5-35B-A3B", 35.0) in total and ("Qwen/Qwen3.5-35B-A3B", 3.0) in active
    assert ("Qwen/Qwen3.5-9B", 9.0) in total and ("Qwen/Qwen3.5-9B", 9.0) in active
    assert len(total) == len(df)


def test_precision_recall_and_json_vs_f1_carry_the_rows(store):
    df = q.precision_recall(store, first56_only=True, include_runs=False)
    got = sorted(_points(P.precision_recall_figure(df)))
    assert got == sorted(zip(df["name"], df["precision"], df["recall"]))
    df = q.json_vs_f1(store, include_runs=True)
    fig = P.json_vs_f1_figure(df)
    assert sorted((t, x, y) for t, x, y in _points(fig)) == sorted(zip(P.unique_labels(df), df["valid_json_pct"], df["avg_command_f1"]))


def test_pareto_front_marks_the_fastest_for_each_score():
    df = pd.DataFrame({
        "name": ["a", "b", "c", "d", "e", "f"], "run_id": [None] * 6, "source": ["published"] * 6,
        "family": ["Qwen", "LFM", "Qwen", "Gemma", "LFM", "Qwen"], "training_method": ["SFT", "base", "SFT", "SFT", "LoRA", "base"],
        "sec_per_step": [0.1, 0.2, 0.15, 0.3, 0.5, 0.2], "score": [30.0, 40.0, 20.0, 35.0, 50.0, 38.0],
    })
    assert P.pareto_front(df)["name"].tolist() == ["a", "b", "e"]
    fig = P.speed_vs_score_figure(df)
    front = [tr for tr in fig.data if tr.meta == "pareto"][0]
    assert list(front.text) == ["a", "b", "e"] and list(front.x) == [0.1, 0.2, 0.5] and front.line.shape == "hv"
    assert fig.layout.xaxis.type == "log"
    assert len(_points(fig)) == 6


def test_speed_vs_score_from_store(store):
    df = q.speed_vs_score(store, first56_only=True, include_runs=False)
    front = [tr for tr in P.speed_vs_score_figure(df).data if tr.meta == "pareto"][0]
    best = df.loc[df["score"].idxmax()]
    fastest = df.loc[df["sec_per_step"].idxmin()]
    assert front.text[0] == fastest["name"] and front.text[-1] == best["name"]
    assert list(front.y) == sorted(front.y)


def test_buckets_and_source_groups_for_runs_with_per_step_data(store):
    df = q.by_bucket(store)
    fig = P.bucket_figure(df)
    assert len(fig.data) == 4 + 2  # 4 published LFM checkpoints + 2 imported runs
    for tr in fig.data:
        assert list(tr.x) == ["early", "mid", "late"]
        part = df[df["name"] == tr.meta].set_index("bucket")  # the full name (tr.name: its short label)
        assert [None if pd.isna(v) else v for v in tr.y] == [part["avg_command_f1"].get(b) for b in ["early", "mid", "late"]]
    df = q.by_source_group(store)
    heat = P.source_group_figure(df).data[0]
    cells = {(names[0], x): z for names, row in zip(heat.customdata, heat.z) for x, z in zip(heat.x, row)
             if not pd.isna(z)}  # full names on hover (heat.y: short labels)
    assert cells == {(r.name, r.source_group): r.avg_command_f1 for r in df.itertuples()}


def test_checkpoint_series_orders_points_and_splits_axes(store):
    df = q.checkpoint_series(store, "LFM2.5-8B-A1B", min_points=1)
    fig = P.checkpoint_series_figure(df)
    kinds = {a.text for a in fig.layout.annotations}
    assert kinds == {"epoch", "checkpoint step"}
    epoch_series = [tr for tr in fig.data if "ToolBench-Full-SFT-N-Epoch" in tr.meta and tr.xaxis == "x"]
    assert len(epoch_series) == 1 and list(epoch_series[0].x) == [1, 2] and list(epoch_series[0].y) == [52.30, 50.48]
    ckpt = [tr for tr in fig.data if tr.xaxis == "x2"]
    assert sorted(x for tr in ckpt for x in tr.x) == sorted(df.loc[df["x_kind"] == "checkpoint step", "x"])


def test_tb2lite_and_tblite_never_share_an_axis(store):
    df = q.tb2lite_vs_tblite(store)
    fig = P.tb2lite_vs_tblite_figure(df)
    assert [tr.name for tr in fig.data] == ["TB2-lite", "TB Lite", "TB 2.1"]
    assert len({tr.yaxis for tr in fig.data}) == 3 and fig.layout.yaxis2.matches is None
    tbl = q.tblite(store)
    lite = fig.data[1]
    assert sorted(lite.y) == sorted(tbl["tb_lite"])
    assert dict(zip(lite.text, lite.error_y.array)) == dict(zip(tbl["model"], tbl["tb_lite_spread"]))
    tb2 = fig.data[0]
    assert set(tb2.text) == {"Qwen/Qwen3.5-9B", "LLM-OS-Models/Qwen3.5-9B-Terminal-SFT-2Epoch-FullFT-2BData",
                             "LLM-OS-Models/Qwen3.5-9B-Terminal-SFT-1Epoch-FullFT-2BData"}
    assert not tb2.error_y.visible


def test_every_registered_plot_draws_from_the_store(store):
    for name, draw in P.PLOTS.items():
        for first56 in (True, False):
            fig = draw(store, first56)
            assert isinstance(fig, go.Figure) and fig.data, name
    empty = P.bucket_figure(q.by_bucket(store, run_ids=["nope"], include_published=False))
    assert not empty.data and "no run" in empty.layout.annotations[0].text
