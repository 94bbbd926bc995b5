"""Every number of a result file goes through the one validator (lab.resultfiles.schema): per-step fields and
each sampled answer alike, no booleans or strings for numbers, metrics within 0–1, at most 1,000 samples a
step. The cases of the hostile round that made a run score 201.67 (samples of 5.0) or crashed on `"nan"`."""
from __future__ import annotations

import copy

import pytest

from lab.errors import ResultFileError
from lab.resultfiles.schema import max_samples_per_step, validate_result
from tests.helpers_paired import variant


@pytest.fixture(scope="module")
def sampled() -> dict:
    return variant("sampled", samples=3, steps=40)


def _with(result: dict, where: str, value) -> dict:
    """A copy of `result` with one field replaced: `step.FIELD` (per_step[2]) or `sample.FIELD` (its samples[1])."""
    out = copy.deepcopy(result)
    kind, field = where.split(".", 1)
    row = out["per_step"][2]
    (row if kind == "step" else row["samples"][1])[field] = value
    return out


@pytest.mark.parametrize("where, value, expected", [
    ("sample.command_f1", 5.0, "less than or equal to 1"),
    ("sample.command_f1", -3.0, "greater than or equal to 0"),
    ("sample.command_f1", 1e300, "less than or equal to 1"),
    ("sample.command_f1", "nan", "valid number"),
    ("sample.command_f1", True, "valid number"),
    ("sample.first_cmd_exact", "1", "valid number"),
    ("sample.latency_s", -1.0, "greater than or equal to 0"),
    ("sample.valid_json", 1, "valid boolean"),
    ("sample.completion_tokens", 2.5, "valid integer"),
    ("step.command_f1", True, "valid number"),
    ("step.command_f1", "0.5", "valid number"),
    ("step.command_recall", 1.5, "less than or equal to 1"),
    ("step.latency_s", False, "valid number"),
    ("step.prompt_tokens", True, "valid integer"),
])
def test_a_bad_number_is_refused_in_one_line_naming_file_row_and_field(sampled, where, value, expected):
    bad = _with(sampled, where, value)
    with pytest.raises(ResultFileError) as err:
        validate_result(bad, "run.json")
    text = str(err.value)
    row = "per_step[2] (task-"
    field = where.split(".", 1)[1]
    assert text.startswith("run.json: ") and row in text and expected in text, text
    assert (f"field 'samples[1].{field}'" if where.startswith("sample") else f"field '{field}'") in text, text
    assert "\n" not in text


@pytest.mark.parametrize("block, key, value", [
    ("aggregate", "avg_command_f1", 3.0), ("aggregate", "valid_json_pct", 101.0), ("aggregate", "steps", True),
    ("sampling", "temperature", -1.0), ("sampling", "top_p", "0.9"), ("sampling", "max_tokens", 1.5),
    (None, "load_time_sec", -2.0), (None, "replay_steps", "14"),
])
def test_run_level_numbers_are_checked_too(sampled, block, key, value):
    bad = copy.deepcopy(sampled)
    if block is None:
        bad[key] = value
    else:
        bad.setdefault(block, {})[key] = value
    with pytest.raises(ResultFileError, match=f"field '{(block + '.') if block else ''}{key}'"):
        validate_result(bad, "run.json")


def test_the_samples_of_a_step_are_capped_as_replay_samples_makes_them(sampled):
    cap = max_samples_per_step()
    assert cap == 1000
    many = copy.deepcopy(sampled)
    many["per_step"][0]["samples"] = [dict(many["per_step"][0]["samples"][0], sample=k) for k in range(cap + 1)]
    with pytest.raises(ResultFileError, match=r"per_step\[0\].*1,001 sampled answers; a step holds at most 1,000"):
        validate_result(many, "run.json")
    many["per_step"][0]["samples"] = many["per_step"][0]["samples"][:cap]
    validate_result(many, "run.json")  # exactly the cap: fine


def test_what_the_lab_writes_passes(sampled):
    validate_result(sampled, "run.json")
    ints = _with(sampled, "sample.command_f1", 1)  # an integer is a number
    validate_result(ints, "run.json")


@pytest.mark.slow  # about 5 s on two cores: the full run, not the fast loop
def test_the_importer_refuses_5000_samples_a_step_quickly_in_one_line(tmp_path):
    """The hostile round's file: 60 steps × 5,000 samples took 88 s to import; now it is refused before any
    sample is checked or scored."""
    import json
    import time

    from lab.store.importer import import_path
    from lab.store.opening import open_store
    from tests.helpers_store import make_results_dir

    result = variant("many", samples=2, steps=60)
    for row in result["per_step"]:
        row["samples"] = [dict(row["samples"][1], sample=k) for k in range(5000)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    with open_store(tmp_path / "lab.duckdb", make_results_dir(tmp_path)) as store:
        start = time.perf_counter()
        report = import_path(store, path)
        took = time.perf_counter() - start
        assert store.rows("SELECT count(*) FROM runs") == [(0,)]
    [(name, why)] = report.failed
    assert "5,000 sampled answers; a step holds at most 1,000" in why and "per_step[0]" in why and "\n" not in why
    assert took < 20, took  # parsing the 300,000 samples' JSON is most of it
