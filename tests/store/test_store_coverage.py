"""Coverage and partial runs: DuckDB `runs.coverage/partial`, the Results table and every plot mark them;
the name filter narrows the plots like the table; the 116 view's rank column is filled."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.resultfiles.files import write_result_file
from lab.settings import Settings
from tests.paths import EXCERPT
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _variant(src: dict, path: Path, name: str, **top: object) -> dict:
    result = {**json.loads(json.dumps(src)), "model": name, "model_short": name, "model_path": name, **top}
    write_result_file(path, result)
    return result


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("coverage")
    results = make_results_dir(root)
    base = write_stored_run(results / "runs" / "excerpt14.json", "excerpt14")
    n = len(base["per_step"])
    _variant(base, results / "runs" / "whole.json", "wholesel", total_input_steps=n)
    _variant(base, results / "runs" / "shard.json", "shardrun", total_input_steps=n, num_shards=2, shard_index=0)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [])
    yield ctx, n
    ctx.pool.close_all()


def test_runs_table_has_coverage_and_partial(lab):
    ctx, n = lab
    df = ctx.store.query("SELECT display_name, steps, total_steps, coverage, partial, num_shards, shard_index FROM runs "
                         "ORDER BY display_name").set_index("display_name")
    assert df.loc["excerpt14", "total_steps"] == 303  # corrected run, no other information
    assert df.loc["excerpt14", "coverage"] == pytest.approx(n / 303, abs=1e-4)
    assert bool(df.loc["excerpt14", "partial"])
    assert df.loc["wholesel", "coverage"] == 1.0 and not bool(df.loc["wholesel", "partial"])
    assert df.loc["shardrun", "coverage"] == 1.0 and bool(df.loc["shardrun", "partial"])  # one shard of two
    assert df.loc["shardrun", "num_shards"] == 2 and df.loc["shardrun", "shard_index"] == 0


def test_results_table_marks_partial_and_fills_rank(lab):
    from lab.ui.results.tab import leaderboard_frame

    ctx, n = lab
    df = leaderboard_frame(ctx, False)
    assert {"coverage", "steps"} <= set(df.columns)
    runs = df[df["source"] == "run"].set_index("run_id")
    assert len(runs) == 3
    names = " ".join(runs["name"])
    assert f"excerpt14 [partial {n}/303]" in names
    assert f"shardrun [partial {n}/{n}, shard 1 of 2]" in names
    assert "wholesel [14-step replay]" in names and "wholesel [partial" not in names  # whole, of a 14-step input
    published = df[df["source"] == "published"]
    assert len(published) == 116 and (published["rank"] != "").all()  # the 116 view's rank is filled
    assert sorted(published["rank"].astype(int)) == list(range(1, 117))
    first56 = leaderboard_frame(ctx, True)
    assert (first56["rank"] != "").all() and len(first56) == 56


def _plot_names(fig) -> list[str]:
    names = []
    for trace in fig.data:
        if trace.type == "bar" and trace.orientation == "h":
            names += list(trace.y)
        elif getattr(trace, "text", None) is not None and not isinstance(trace.text, str):
            names += [str(t) for t in trace.text]
        elif trace.name:
            names.append(str(trace.name))
    return names


def test_every_plot_marks_partial_runs(lab):
    from lab.ui.results.tab import draw_plot, plot_registry

    ctx, n = lab
    for name in plot_registry():
        fig = draw_plot(ctx, name, False)
        text = json.dumps(fig.to_plotly_json(), default=str)
        if "excerpt14" in text:
            assert f"partial {n}/303" in text, f"plot {name} shows the 14-step run without its coverage"
    bars = draw_plot(ctx, "leaderboard", False)
    labels = [y for t in bars.data for y in t.y]
    top = labels[-1]  # best on top
    assert "excerpt14" not in top or "partial" in top
    hatched = [s for t in bars.data for y, s in zip(t.y, t.marker.pattern.shape) if "excerpt14" in y]
    assert hatched == ["x"]


def test_name_filter_narrows_the_plots(lab):
    from lab.ui.results.tab import draw_plot, leaderboard_frame

    ctx, _ = lab
    assert len(leaderboard_frame(ctx, False, "wholesel")) == 1
    fig = draw_plot(ctx, "leaderboard", False, "wholesel")
    assert [y for t in fig.data for y in t.y] == ["wholesel [14-step replay]"]
    full = draw_plot(ctx, "leaderboard", False)
    assert sum(len(t.y) for t in full.data) == 119
    scatter = draw_plot(ctx, "precision_recall", False, "wholesel")
    points = [x for t in scatter.data if t.meta != "iso-f1" for x in t.x]
    assert len(points) == 1


def test_coverage_is_against_the_replay_the_run_was_made_on():
    """Issue 41: 2 steps of the 14-step excerpt were "2/303 steps partial". The lab's runs record the scored
    steps of their replay (`replay_steps`); the shards' total_input_steps still wins; a file that says
    nothing (or nonsense) is counted against the full step set of its scoring version, as before."""
    from lab.store.records import coverage_fields

    assert coverage_fields({"replay_steps": 14}, 2, "corrected_303") == {
        "total_steps": 14, "coverage": round(2 / 14, 4), "selected_steps": None, "num_shards": None,
        "shard_index": None, "partial": True}
    assert coverage_fields({"replay_steps": 14}, 14, "corrected_303")["partial"] is False
    sharded = coverage_fields({"replay_steps": 14, "total_input_steps": 10, "num_shards": 2, "shard_index": 0}, 5,
                              "corrected_303")
    assert sharded["total_steps"] == 10 and sharded["partial"] is True
    for nonsense in ("14", -3, 0, True, 10**9, 2.5, None, [14]):
        assert coverage_fields({"replay_steps": nonsense}, 2, "corrected_303")["total_steps"] == 303, nonsense
    assert coverage_fields({}, 2, "legacy_386")["total_steps"] == 386


@pytest.mark.slow
def test_a_cli_run_records_its_replay_and_the_store_counts_against_it(tmp_path):
    from lab.store import open_store
    from tests.helpers_app import lab_env, run_lab_cli

    results = make_results_dir(tmp_path)
    done = run_lab_cli(["replay", "--replay", str(EXCERPT), "--engine", "reference", "--limit", "2", "--name", "two"],
                       env=lab_env(LAB_RESULTS=str(results), LAB_CACHE_DIR=str(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads((results / "runs" / "two.json").read_text())
    from lab.data import load_replay

    assert written["replay_steps"] == len(load_replay(str(EXCERPT)).steps) == 14
    with open_store(Settings(results_dir=results, db_path=results / "lab.duckdb")) as store:
        row = store.query("SELECT name, steps, total_steps, partial FROM results_all WHERE source = 'run'")
    assert written["selection"] == {"mode": "corrected", "tasks": None, "limit": 2, "steps": 2}
    # issue 56: the limit was chosen, so the run is whole for its selection, not "[partial 2/14]"
    assert (row.iloc[0]["steps"], row.iloc[0]["total_steps"], bool(row.iloc[0]["partial"])) == (2, 2, False)
    assert row.iloc[0]["name"].endswith("[limited to 2 steps]")


def test_a_selection_limited_on_purpose_is_whole_for_its_steps():
    """Issue 56: runs of the training callback with limit=2 were "[partial 2/14]", coverage 0.14. A result file
    records its selection (mode, tasks, limit and how many steps it chose); a limit or tasks chosen on purpose
    make the run count against those steps. A file saying nothing, or nonsense, is counted as before."""
    from lab.store.records import coverage_fields

    limited = {"replay_steps": 14, "selection": {"mode": "corrected", "tasks": None, "limit": 2, "steps": 2}}
    assert coverage_fields(limited, 2, "corrected_303") == {
        "total_steps": 2, "coverage": 1.0, "selected_steps": 2, "num_shards": None, "shard_index": None,
        "partial": False}
    # a stored run that lacks one of the steps it was asked: partial, of its limited selection
    assert coverage_fields(limited, 1, "corrected_303")["partial"] is True
    tasks = {"replay_steps": 14, "selection": {"mode": "corrected", "tasks": ["task-000"], "limit": None, "steps": 7}}
    assert coverage_fields(tasks, 7, "corrected_303")["selected_steps"] == 7
    # a limit that limits nothing, no limit, no count, or nonsense: the replay is the whole, as before
    for selection in ({"limit": 50, "steps": 14}, {"limit": None, "tasks": None, "steps": 2}, {"limit": 2},
                      {"limit": 2, "steps": "2"}, {"limit": 2, "steps": True}, {"limit": 2, "steps": -1},
                      {"limit": 2, "steps": 10**9}, "limit 2", [2]):
        fields = coverage_fields({"replay_steps": 14, "selection": selection}, 2, "corrected_303")
        assert (fields["selected_steps"], fields["total_steps"], fields["partial"]) == (None, 14, True), selection
    # a file claiming fewer chosen steps than it answered is not believed
    assert coverage_fields(limited, 5, "corrected_303")["selected_steps"] is None
    # one shard of several is counted against the shards' whole whatever its selection says
    shard = {**limited, "total_input_steps": 10, "num_shards": 2, "shard_index": 0}
    assert coverage_fields(shard, 2, "corrected_303")["total_steps"] == 10
