"""Tags and notes in DuckDB, badges, and exports (CSV, JSONL, DPO preference pairs) of real steps."""
from __future__ import annotations

import csv
import json

import pytest

from lab.data import load_replay
from lab.errors import LabError
from lab.triage import (
    SliceSpec, add_annotation, annotation_badges_html, annotations_for, export_preference_pairs, export_slice,
    preference_pairs, slice_steps, tags_in_use,
)
from tests.triage.test_triage_common import EXCERPT, PERTURBATIONS, run_id, step_keys, triage_store  # noqa: F401


def test_tags_and_notes_are_stored_with_author_and_time(triage_store):
    rid, key = run_id(triage_store, "perturbed"), step_keys(triage_store)[3]
    new_id = add_annotation(triage_store, rid, key, "destructive", note="wipes <root>", author="ana")
    found = annotations_for(triage_store, rid, key)
    assert [(a.id, a.tag, a.note, a.author) for a in found] == [(new_id, "destructive", "wipes <root>", "ana")]
    assert found[0].created_at is not None
    assert "destructive" in tags_in_use(triage_store)
    html = annotation_badges_html(found)
    assert ">destructive</span>" in html and "&lt;root&gt;" in html and "<root>" not in html
    # tags show up wherever the step is listed, and slices can filter by them
    spec = SliceSpec(run_ids=[rid], tags=["destructive"])
    listed = slice_steps(triage_store, spec)
    assert list(listed.step_key) == [key] and listed.tags[0] == "destructive"
    with pytest.raises(LabError, match="tag is empty"):
        add_annotation(triage_store, rid, key, "  ")
    with pytest.raises(LabError, match="has no step"):
        add_annotation(triage_store, rid, "task-999/0", "x")


def test_export_csv_and_jsonl_carry_units_output_and_annotations(triage_store, tmp_path):
    rid = run_id(triage_store, "perturbed")
    key = step_keys(triage_store)[0]
    add_annotation(triage_store, rid, key, "broken-json", note="missing brace", author="bo")
    spec = SliceSpec(run_ids=[rid], valid_json=False)
    jsonl = export_slice(triage_store, spec, tmp_path / "s.jsonl", "jsonl")
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and {r["failure_kind"] for r in rows} == {"invalid_json", "truncated"}
    tagged = next(r for r in rows if r["step_key"] == key)
    assert tagged["annotations"][0]["tag"] == "broken-json" and tagged["annotations"][0]["author"] == "bo"
    assert isinstance(tagged["pred_command_units"], list) and tagged["pred_command_units"]
    assert tagged["output"].startswith("{") and tagged["output_complete"] is True
    with (export_slice(triage_store, spec, tmp_path / "s.csv", "csv")).open(newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 2
    row = next(r for r in table if r["step_key"] == key)
    assert row["tags"] == "broken-json" and json.loads(row["ref_command_units"]) == tagged["ref_command_units"]
    with pytest.raises(LabError, match="format"):
        export_slice(triage_store, spec, tmp_path / "s.xml", "xml")


def test_preference_pairs_choose_the_higher_f1_answer(triage_store, tmp_path):
    ref, bad = run_id(triage_store, "reference"), run_id(triage_store, "perturbed")
    f1 = triage_store.query(
        "SELECT a.step_key, a.command_f1 AS ref_f1, b.command_f1 AS bad_f1, b.raw_output FROM steps a"
        " JOIN steps b USING (step_key) WHERE a.run_id = ? AND b.run_id = ?", [ref, bad])
    differing = f1[f1.ref_f1 != f1.bad_f1]
    messages = {s.key: s.messages for s in load_replay(str(EXCERPT)).steps}
    pairs = preference_pairs(triage_store, bad, ref, messages_by_key=messages)
    assert {p["step_key"] for p in pairs} == set(differing.step_key) and pairs
    for p in pairs:
        assert p["chosen_run"] == ref and p["rejected_run"] == bad
        assert p["chosen_f1"] > p["rejected_f1"] and p["margin"] == round(p["chosen_f1"] - p["rejected_f1"], 4)
        assert p["rejected"] == differing.set_index("step_key").raw_output[p["step_key"]]
        assert p["messages"] and p["messages"][0]["role"] in ("system", "user")
        # the reference file keeps a 1,200-character preview only: a full-length preview may be cut
        assert p["rejected_complete"] is True and p["chosen_complete"] == (len(p["chosen"]) < 1200)
    risky = step_keys(triage_store)[[k for k, v in PERTURBATIONS.items() if v == "risky"][0]]
    only = preference_pairs(triage_store, ref, bad, spec=SliceSpec(flags=["risky"]))
    assert [p["step_key"] for p in only] == [risky]
    assert preference_pairs(triage_store, ref, bad, min_margin=1.0) == []
    out = export_preference_pairs(triage_store, ref, bad, tmp_path / "pairs.jsonl")
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(pairs) and set(json.loads(lines[0])) >= {"step_key", "chosen", "rejected", "margin"}
