"""A checkpoint series the base model can join (issue: a run named checkpoint-0 stayed out of its series), point
by point against its first point: score and reference NLL over all steps, buckets and a saved slice, with
simultaneous intervals; the plot's reference-NLL axis, and no fake score of 0."""
from __future__ import annotations

import json

import pytest

from lab.errors import LabError
from lab.store.opening import open_store
from lab.store.series import series_frame
from lab.figures.series import series_stats_figure
from lab.store.series_members import join_series, leave_series
from lab.analysis.series_judgement import (
    ALL_STEPS, NO_NLL, lead_text, series_stats, series_table,
)
from lab.triage import SliceSpec, save_slice
from lab.triage.series_slices import slice_step_keys
from tests.helpers_paired import reference_file, variant, write
from tests.helpers_store import make_results_dir

RESAMPLES = 1000


@pytest.fixture()
def lab(tmp_path):
    results = make_results_dir(tmp_path)
    runs = results / "runs"
    # a training run's checkpoints, saved as Batch names them (checkpoint-N.json), and the base model named
    # checkpoint-0 by the user
    for step, shift in ((100, 0.04), (200, 0.06)):
        ckpt = variant(f"checkpoint-{step}", shift=shift, seed=step, model_path=f"/train/myrun/checkpoint-{step}")
        ckpt["engine_spec"] = f"transformers:/train/myrun/checkpoint-{step}"
        write(runs, f"checkpoint-{step}", ckpt)
        write(runs, f"checkpoint-{step}.reference", reference_file(ckpt, 2.0 - step / 400, seed=step))
    # the base model replayed with `?name=checkpoint-0`: the file is named so, the run keeps the model's name
    base = variant("base-model", seed=1, model_path="/models/base-model")
    base["engine_spec"] = "transformers:/models/base-model?name=checkpoint-0"
    write(runs, "checkpoint-0", base)
    write(runs, "checkpoint-0.reference", reference_file(base, 2.0, seed=1))
    store = open_store(tmp_path / "lab.duckdb", results)
    ids = {s: store.scalar("SELECT run_id FROM runs WHERE model_short = ?", [f"checkpoint-{s}" if s else "base-model"])
           for s in (0, 100, 200)}
    yield store, ids, results
    store.close()


def test_checkpoint_runs_form_a_series_from_their_folder_and_the_base_joins_at_0(lab):
    store, ids, _ = lab
    assert store.scalar("SELECT checkpoint_step FROM runs WHERE run_id = ?", [ids[0]]) == 0
    frame = series_frame(store)
    assert list(frame[frame["series"] == "myrun"]["x"]) == [100, 200]  # files named checkpoint-N: the folder
    join_series(store, ids[0], "myrun", 0)
    frame = series_frame(store)
    line = frame[frame["series"] == "myrun"]
    assert list(line["x"]) == [0, 100, 200] and line["run_id"].iloc[0] == ids[0]
    assert leave_series(store, ids[0]) and not leave_series(store, ids[0])
    assert list(series_frame(store).query("series == 'myrun'")["x"]) == [100, 200]


@pytest.mark.parametrize("series, position, kind, message", [
    ("", 0, "checkpoint step", "series name is empty"),
    ("x" * 201, 0, "checkpoint step", "longer than 200"),
    ("myrun", -1, "checkpoint step", "whole number from 0"),
    ("myrun", 1.5, "checkpoint step", "whole number from 0"),
    ("myrun", "ten", "checkpoint step", "give a whole number"),
    ("myrun", 0, "minute", "position kind"),
])
def test_a_placement_names_what_is_wrong(lab, series, position, kind, message):
    store, ids, _ = lab
    with pytest.raises(LabError, match=message):
        join_series(store, ids[0], series, position, kind)
    with pytest.raises(LabError, match="no run 'nope'"):
        join_series(store, "nope", "myrun", 0)


def test_each_checkpoint_against_the_first_over_buckets_and_a_saved_slice(lab):
    store, ids, _ = lab
    join_series(store, ids[0], "myrun", 0)
    trained = ["task-000", "task-001", "task-002", "task-003", "task-004", "task-005"]
    save_slice(store, "trained", SliceSpec(task_ids=trained))
    keys = slice_step_keys(store, "trained")
    assert keys and all(k.split("/")[0] in trained for k in keys)
    stats = series_stats(store, "myrun", keys, "trained", resamples=RESAMPLES)
    assert [p.name for p in stats.parts] == [ALL_STEPS, "early", "mid", "late", "slice: trained"]
    table = series_table(stats)
    first = table[table["position"] == "step 0"]
    assert set(first["Δ score vs first"]) == {"first point"} and len(first) == 5
    whole = table[(table["steps of"] == ALL_STEPS) & (table["position"] == "step 200")].iloc[0]
    assert whole["Δ score vs first"].startswith("+") and "[" in whole["Δ score vs first"]
    assert whole["Δ ref NLL/token vs first"].startswith("−")  # the reference got likelier
    sliced = table[(table["steps of"] == "slice: trained") & (table["position"] == "step 100")].iloc[0]
    assert "no interval" in sliced["Δ score vs first"] or "[" in sliced["Δ score vs first"]
    diff = stats.parts[0].deltas["score"][1].difference
    assert diff.adjustment == "simultaneous over 2 comparisons (max-T)"
    ranked = stats.points.sort_values("score", ascending=False)
    best, runner = (f"step {x}" for x in ranked["x"].iloc[:2])
    assert lead_text(stats).startswith(f"{best} over {runner}: +")


def test_the_plot_shows_the_nll_axis_and_a_missing_score_as_a_gap(lab):
    store, ids, results = lab
    join_series(store, ids[0], "myrun", 0)
    stats = series_stats(store, "myrun", resamples=RESAMPLES)
    fig = series_stats_figure(stats)
    nll = next(t for t in fig.data if t.meta == "ref_nll")
    assert nll.yaxis == "y2" and fig.layout.yaxis2.title.text.startswith("reference NLL per token")
    assert [round(v, 4) for v in nll.y] == [round(v, 4) for v in stats.points["ref_nll"]]
    delta = next(t for t in fig.data if t.meta == "delta")
    assert list(delta.x) == [0, 100, 200] and len(delta.error_y.array) == 3
    # a run without a score (its file's aggregate says none): a gap, never 0
    unscored = variant("checkpoint-300", seed=300, model_path="/train/myrun/checkpoint-300")
    unscored["aggregate"] = {"avg_command_f1": None}
    path = write(results / "runs", "checkpoint-300", unscored)
    from lab.store.importer import import_path

    assert not import_path(store, path).failed
    stats = series_stats(store, "myrun", resamples=RESAMPLES)
    score = next(t for t in series_stats_figure(stats).data if t.meta == "score")
    assert list(score.x) == [0, 100, 200, 300] and score.y[-1] is None and 0 not in list(score.y)


def test_a_series_without_reference_nll_says_how_to_get_it(lab):
    store, ids, results = lab
    for rid in (ids[100], ids[200]):
        join_series(store, rid, "no-nll", 1 if rid == ids[100] else 2)
    store.execute("DELETE FROM reference_steps")
    stats = series_stats(store, "no-nll", resamples=RESAMPLES)
    assert NO_NLL in stats.notes
    fig = series_stats_figure(stats)
    assert not [t for t in fig.data if t.meta == "ref_nll"]
    assert any(a.text == NO_NLL for a in fig.layout.annotations)
    with pytest.raises(LabError, match="no checkpoint series 'nothing'"):
        series_stats(store, "nothing")


def test_the_cli_places_a_run_and_shows_the_series(lab, capsys):
    from lab.cli import main

    store, ids, results = lab
    db = ["results", "--db", str(store.path), "--results", str(results)]
    store.close()
    assert main([*db, "series", "join", ids[0], "myrun", "--at", "0"]) == 0
    assert "placed in myrun at checkpoint step 0" in capsys.readouterr().out
    assert main([*db, "series", "show", "myrun"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("position,run,steps of,score") and "step 0" in out and "# Δ = checkpoint" in out
    assert main([*db, "series", "join", ids[0], "myrun", "--at", "-3"]) == 2
    assert "whole number from 0" in capsys.readouterr().err
    json.dumps(out)  # plain text, nothing binary


def test_a_read_only_store_refuses_a_placement(lab):
    """A public Space's store is read-only for visitors: placing a run says so and changes nothing."""
    store, ids, _ = lab
    store.refuse_writes = "this lab is read-only for visitors"
    try:
        with pytest.raises(LabError, match="LAB_PUBLIC_SERIES=1"):  # its own switch, named
            join_series(store, ids[0], "myrun", 0)
    finally:
        store.refuse_writes = None
    assert list(series_frame(store).query("series == 'myrun'")["x"]) == [100, 200]



@pytest.mark.parametrize("position", ["1e309", "-1e309", "nan", "inf", float("inf"), "1" * 400])
def test_a_position_no_number_holds_is_one_line(lab, position):
    """Infinite, NaN or 400-digit positions are refused in one short line, never an OverflowError."""
    store, ids, _ = lab
    with pytest.raises(LabError, match=r"^position .{1,60}: give a whole number") as err:
        join_series(store, ids[0], "s", position)
    assert len(str(err.value)) < 200


def test_an_unknown_run_is_named_short(lab):
    from lab.store.run_lookup import find_run

    with pytest.raises(LabError, match="names no run") as err:
        find_run(lab[0], "x" * 100_000)
    assert len(str(err.value)) < 600
