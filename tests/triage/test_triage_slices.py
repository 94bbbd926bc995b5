"""Slices over real steps: every filter, URL round trip, saved slices, regex errors."""
from __future__ import annotations

import pytest
from tests.triage.test_triage_common import PERTURBATIONS, run_id, step_keys, triage_store  # noqa: F401

from lab.errors import LabError
from lab.triage import SliceSpec, count_slice, list_slices, load_slice, save_slice, slice_steps


def keys(store, **kw) -> list[str]:
    spec = SliceSpec(run_ids=[run_id(store, "perturbed")], order_by="step", **kw)
    return list(slice_steps(store, spec)["step_key"])


def perturbed_key(store, kind: str) -> str:
    pos = {v: k for k, v in PERTURBATIONS.items()}[kind]
    return step_keys(store)[pos]


def test_no_filter_lists_every_step_of_the_runs(triage_store):
    spec = SliceSpec(run_ids=[run_id(triage_store, "perturbed"), run_id(triage_store, "reference")])
    assert count_slice(triage_store, spec) == 28
    assert len(slice_steps(triage_store, spec, limit=10, offset=20)) == 8


def test_f1_range_and_first_command(triage_store):
    low = keys(triage_store, f1_max=0.4999)
    df = triage_store.query("SELECT step_key, command_f1, first_cmd_exact FROM steps WHERE run_id = ?",
                            [run_id(triage_store, "perturbed")])
    assert set(low) == set(df[df.command_f1 < 0.5].step_key) and low
    assert set(keys(triage_store, f1_min=0.5)) == set(df[df.command_f1 >= 0.5].step_key)
    assert set(keys(triage_store, first_cmd_exact=False)) == set(df[df.first_cmd_exact < 1].step_key)


def test_valid_json_and_failure_kinds(triage_store):
    invalid = set(keys(triage_store, valid_json=False))
    assert invalid == {perturbed_key(triage_store, "invalid_json"), perturbed_key(triage_store, "truncated")}
    assert keys(triage_store, failure_kinds=["truncated"]) == [perturbed_key(triage_store, "truncated")]
    assert keys(triage_store, failure_kinds=["wrong_types"]) == [perturbed_key(triage_store, "wrong_types")]
    assert keys(triage_store, failure_kinds=["missing_fields"]) == [perturbed_key(triage_store, "missing_fields")]
    assert perturbed_key(triage_store, "prose_around_json") in keys(triage_store, failure_kinds=["prose_around_json"])


def test_premature_and_missed_task_complete(triage_store):
    assert keys(triage_store, task_complete="premature") == [perturbed_key(triage_store, "empty_commands_premature")]
    assert keys(triage_store, task_complete="missed") == []  # no reference step of the excerpt is complete


def test_bucket_source_group_task_and_ref_units(triage_store):
    early = keys(triage_store, buckets=["early"])
    assert early == ["task-000/0", "task-000/1", "task-001/0", "task-001/1"]
    assert len(keys(triage_store, source_groups=["software_engineering"])) == 14
    assert keys(triage_store, source_groups=["math"]) == []
    assert all(k.startswith("task-001/") for k in keys(triage_store, task_ids=["task-001"]))
    df = triage_store.query("SELECT step_key, n_ref_units FROM steps WHERE run_id = ?", [run_id(triage_store, "perturbed")])
    assert set(keys(triage_store, ref_units_min=20)) == set(df[df.n_ref_units >= 20].step_key)
    assert set(keys(triage_store, ref_units_max=5)) == set(df[df.n_ref_units <= 5].step_key)


def test_text_and_regex_over_commands_and_raw(triage_store):
    risky = perturbed_key(triage_store, "risky")
    assert keys(triage_store, text="RM -RF", text_in="commands") == [risky]
    assert keys(triage_store, text=r"^vim\s+\w+\.cpp$", text_regex=True, text_in="commands") == [risky]  # per command
    assert keys(triage_store, text=r"(?m)^vim\s+\w+\.cpp$", text_regex=True, text_in="commands") == [risky]
    assert keys(triage_store, text="Let me know if it works", text_in="raw") == [perturbed_key(triage_store, "prose_around_json")]
    with pytest.raises(LabError, match="invalid regular expression"):
        keys(triage_store, text="(unclosed", text_regex=True)


def test_risk_flags_filter_like_other_fields(triage_store):
    risky = perturbed_key(triage_store, "risky")
    assert keys(triage_store, flags=["risky"]) == [risky]
    assert keys(triage_store, flags=["hang"]) == [risky]
    assert keys(triage_store, risk_names=["hang:editor"]) == [risky]
    slow = perturbed_key(triage_store, "no_newline_long")
    assert keys(triage_store, flags=["no_newline", "long_duration"]) == [slow]
    assert set(keys(triage_store, flags=["units_from_fallback"])) == {
        perturbed_key(triage_store, "invalid_json"), perturbed_key(triage_store, "truncated")}
    with pytest.raises(LabError, match="flags"):
        keys(triage_store, flags=["1=1; DROP TABLE steps"])


def test_url_round_trip_and_saved_slices(triage_store):
    spec = SliceSpec(run_ids=["a", "b"], f1_max=0.5, valid_json=False, buckets=["early", "late"],
                     text="rm -rf", flags=["risky"], task_complete="premature")
    query = spec.to_query()
    assert "run_ids=a&run_ids=b" in query and "valid_json=false" in query
    assert SliceSpec.from_query(query) == spec
    assert SliceSpec.from_query({"f1_max": "0.5", "buckets": ["early"], "tab": "triage"}) == SliceSpec(f1_max=0.5, buckets=["early"])
    with pytest.raises(LabError, match="f1_max"):
        SliceSpec.from_query("f1_max=abc")
    save_slice(triage_store, "risky early", spec, author="tester")
    assert "risky early" in list_slices(triage_store)
    assert load_slice(triage_store, "risky early") == spec
    with pytest.raises(LabError, match="no saved slice"):
        load_slice(triage_store, "nope")


def test_ui_filter_widgets_round_trip_a_spec():
    from lab.ui.triage.filters import inputs_from_spec, spec_from_inputs

    spec = SliceSpec(run_ids=["r1"], f1_min=0.2, valid_json=True, first_cmd_exact=False, task_complete="missed",
                     ref_units_max=40, text="vim", text_regex=True, flags=["hang"], order_by="command_f1", descending=True)
    assert spec_from_inputs(*inputs_from_spec(spec)) == spec
    assert spec_from_inputs(*inputs_from_spec(SliceSpec())) == SliceSpec()
