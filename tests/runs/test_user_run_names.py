"""The name a user gives a run is the name shown everywhere (issue: `name=tiny-base` wrote tiny-base.json but
the store, the series table and Results called the run "tiny"; `name=tiny-samples` on …/sft/checkpoint-4
showed as "sft (checkpoint-4)"). The result file records it (`run_name`) and the store shows it as given."""
from __future__ import annotations

import json
import shutil

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.runs.replay import ReplayConfig, replay
from lab.store.names import display_name
from lab.store.opening import open_store
from lab.store.series import series_frame
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT


@pytest.fixture(scope="module")
def step():
    return load_replay(EXCERPT, mode="corrected").steps[:1]


def run_named(spec: str, runs, step, **config) -> dict:
    engine = create_engine(spec)
    engine.load()
    try:
        path = replay(engine, step, ReplayConfig(out_dir=runs, **config))
    finally:
        engine.close()
    return json.loads(path.read_text())


def test_a_name_given_in_the_spec_is_the_name_the_store_shows(tmp_path, tiny_model_dir, step):
    results = make_results_dir(tmp_path)
    runs = results / "runs"
    models = tmp_path / "models"
    shutil.copytree(tiny_model_dir, models / "tiny")
    shutil.copytree(tiny_model_dir, models / "sft" / "checkpoint-4")
    options = "device=cpu&max_tokens=4"
    base = run_named(f"transformers:{models / 'tiny'}?{options}&name=tiny-base", runs, step)
    samples = run_named(f"transformers:{models / 'sft' / 'checkpoint-4'}?{options}&name=tiny-samples", runs, step)
    plain = run_named(f"transformers:{models / 'sft' / 'checkpoint-4'}?{options}", runs, step)
    assert (runs / "tiny-base.json").is_file() and (runs / "tiny-samples.json").is_file()
    assert (base["run_name"], base["model_short"]) == ("tiny-base", "tiny-base")
    assert samples["run_name"] == "tiny-samples" and "run_name" not in plain  # the lab's own name: not recorded
    store = open_store(tmp_path / "lab.duckdb", results)
    try:
        names = dict(store.rows("SELECT model_short, display_name FROM runs WHERE path LIKE 'runs/%'"))
        assert names["tiny-base"] == "tiny-base" and names["tiny-samples"] == "tiny-samples"
        assert names[plain["model_short"]] == "sft (checkpoint-4)"  # no name given: the folder's, as before
        listed = {name.split(" [partial")[0] for name in series_frame(store, min_runs=1)["name"]}
        assert {"tiny-samples", "sft (checkpoint-4)"} <= listed  # the series table: one series each, of one run
    finally:
        store.close()


def test_a_taken_name_shows_as_the_file_it_got(tmp_path, step):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "mine.json").write_text("{}")
    notes: list[str] = []
    result = run_named("reference?name=mine", runs, step, notify=notes.append)
    assert result["run_name"] == "mine-2" and (runs / "mine-2.json").is_file() and "mine-2" in notes[0]


def test_the_cli_name_is_recorded_too(tmp_path, step):
    result = run_named("reference", tmp_path / "runs", step, run_name="my run", name_given=True)
    assert result["run_name"] == "my-run" and (tmp_path / "runs" / "my-run.json").is_file()


@pytest.mark.parametrize("given, shown", [
    ("tiny-base", "tiny-base"),
    (" two\twords\n", "two words"),
    ("esc\x1b[31mred\x00", "esc [31mred"),  # control characters never reach a page or a CSV
    ("<b>bold</b>", "<b>bold</b>"),  # kept as text: every surface escapes it
    ("x" * 5000, "x" * 200),
    ("", None),
    (7, None),
])
def test_a_given_name_from_any_file_is_shown_tidied(given, shown):
    result = {"run_name": given, "model_short": "checkpoint-4", "model_path": "/m/sft/checkpoint-4", "engine_spec": "x"}
    assert display_name(result) == (shown if shown is not None else "sft (checkpoint-4)")
