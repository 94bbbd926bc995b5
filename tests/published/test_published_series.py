"""Published runs in the store: unique display names, series from names, the series plot, flips, links."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.store.opening import open_store
from lab.store.importer import import_path
from lab.published.links import link_published
from lab.store.series import series_figure, series_frame, series_runs
from lab.triage import flip_table
from tests.paths import TB2LITE
from tests.helpers_store import make_results_dir

SAMPLE = TB2LITE / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"
RLVR = "lfm25_echo_rlvr_gpu6_eval_20260612/lfm25-echo-raw-lfm25-checkpoint-{}.json"

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/tb2lite/published is missing")


def variant(data: dict, k: int, **top) -> dict:
    """The sample with its first k steps' F1 set to 1 (a different run of the same shape)."""
    rows = [dict(r, command_f1=1.0 if i < k else r["command_f1"]) for i, r in enumerate(data["per_step"])]
    return {**data, **top, "per_step": rows, "aggregate": {**data["aggregate"], "avg_command_f1": round(
        sum(r["command_f1"] for r in rows) / len(rows), 4)}}


@pytest.fixture()
def store(tmp_path: Path):
    data = json.loads(SAMPLE.read_text())
    results = make_results_dir(tmp_path)
    for k, ckpt in ((1, 25), (3, 50), (5, 75)):
        path = results / "published" / RLVR.format(ckpt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(variant(data, k, model_short=f"ckpt{ckpt}")))
    rerun = results / "published" / "lfm25_echo_rlvr_gpu6_eval_20260612" / "lfm25-raw-base-no-sft-rerun-20260612.json"
    rerun.write_text(json.dumps(variant(data, 7, model_short="rerun")))  # stands in for the file the leaderboard names
    # three lab runs sharing one model_path ("reference") and a name-derived checkpoint series
    for i, name in enumerate(("a", "b", "c")):
        (results / "runs").mkdir(exist_ok=True)
        (results / "runs" / f"{name}.json").write_text(json.dumps(variant(data, i, model_path="reference",
                                                                           model_short="reference")))
    for ckpt in (100, 200):
        (results / "runs" / f"mymodel-checkpoint-{ckpt}.json").write_text(json.dumps(variant(
            data, ckpt // 100, model_path=f"/ckpt/mymodel/checkpoint-{ckpt}", model_short=f"mymodel-checkpoint-{ckpt}")))
    s = open_store(tmp_path / "lab.duckdb", results)
    link_published(s)
    yield s
    s.close()


def test_display_names_are_unique_per_run(store):
    names = store.query("SELECT display_name FROM runs WHERE model_path = 'reference' ORDER BY 1")["display_name"]
    assert list(names) == ["reference [a]", "reference [b]", "reference [c]"]
    bars = store.query("SELECT r.display_name, count(*) FROM steps s JOIN runs r USING (run_id) GROUP BY 1")
    assert len(bars) == store.scalar("SELECT count(*) FROM runs")  # one bar per run, none merged


def test_published_runs_are_linked_and_sourced(store):
    rows = store.dicts("SELECT r.source, p.series, p.x, p.kind, p.leaderboard_row FROM runs r "
                       "JOIN published_runs p USING (run_id) WHERE p.series IS NOT NULL ORDER BY p.x")
    assert [(r["source"], r["series"], r["x"]) for r in rows] == [
        ("published", "ECHO RLVR raw (LFM2.5-8B-A1B)", x) for x in (25, 50, 75)]
    row = store.scalar("SELECT row_no FROM leaderboard WHERE upstream_file LIKE '%lfm25-raw-base-no-sft-rerun-20260612.json'")
    linked = store.scalar("SELECT p.leaderboard_row FROM published_runs p WHERE run_key LIKE '%no-sft-rerun-20260612'")
    assert row is not None and linked == row
    assert link_published(store) == 0  # a second pass changes nothing


def test_series_from_catalogue_and_names_plot_and_flips(store):
    series = series_runs(store)
    assert len(series["ECHO RLVR raw (LFM2.5-8B-A1B)"]) == 3
    assert len(series["mymodel"]) == 2
    df = series_frame(store)
    fig = series_figure(df)
    rlvr = next(t for t in fig.data if t.name.startswith("ECHO RLVR raw"))
    assert list(rlvr.x) == [25, 50, 75] and len(set(rlvr.text)) == 3
    flips = flip_table(store, series["ECHO RLVR raw (LFM2.5-8B-A1B)"], 0.5)
    assert not flips.empty and set(flips["flip"]) == {"wrong → right"}
