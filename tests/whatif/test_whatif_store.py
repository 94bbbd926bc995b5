"""What-if answers: running edits on real engines, the DuckDB tables (apart from runs/steps),
a public visitor's session keeper, the JSONL export and `python -m lab whatif …`."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from lab.data import load_replay
from lab.engines import Sampling, create_engine
from lab.runs.pipeline import run_steps
from lab.settings import Settings
from lab.store.opening import open_store
from lab.whatif import (DuckWhatIfStore, EditError, FieldEdit, SessionWhatIfStore, WhatIf, export_jsonl,
                        field_text, limits, run_whatif)
from tests.paths import EXCERPT, REPO

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
NEW_SCREEN = "ls\n" * 50  # a drastic screen edit: the tiny sampled model answers differently


@pytest.fixture(scope="module")
def step():
    return load_replay(str(EXCERPT)).by_key["task-000/0"]


@pytest.fixture(scope="module")
def whatif(step):
    return WhatIf(step.key, (FieldEdit("screen", field_text(step, "screen"), NEW_SCREEN),), note="longer screen")


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu")
    engine.load()
    engine.default_sampling = Sampling(temperature=1.0, max_tokens=24, seed=7)
    yield engine
    engine.close()


def test_reference_answers_from_data(step, whatif):
    engine = create_engine("reference")
    engine.load()
    result = run_whatif(engine, step, whatif, spec="reference", name="reference")
    assert result.answers_from_data and result.f1 == 1.0 and result.error is None
    assert result.edit_id == whatif.edit_id and result.ref_units == result.pred_units
    assert "+ls\n" in result.patch and "Current Terminal Screen:" in result.patch  # raw fallback: the prompt text


def test_model_engine_answers_the_edited_prompt(step, whatif, tiny_engine):
    result = run_whatif(tiny_engine, step, whatif, spec="tiny", name="tiny", kind="transformers")
    original = run_steps(tiny_engine, [step])[0]
    assert not result.answers_from_data and result.prompt_status == "chat_template"
    assert result.edited_prompt.count("ls\n") >= 50 and "ls\nls\n" not in result.original_prompt
    assert result.original_prompt == original.prompt.text
    assert result.raw_output and result.raw_output != original.completion.text
    assert result.prompt_tokens > original.prompt.n_tokens
    assert set(result.metrics) == {"first_cmd_exact", "command_precision", "command_recall", "command_f1"}


def test_store_round_trip_apart_from_runs(tmp_path, step, whatif, tiny_engine):
    settings = Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb")
    result = run_whatif(tiny_engine, step, whatif, spec="transformers:tiny", name="tiny", kind="transformers")
    with open_store(settings) as store:
        runs_before = store.scalar("SELECT count(*) FROM runs"), store.scalar("SELECT count(*) FROM steps")
        keeper = DuckWhatIfStore(store)
        assert keeper.save_edit(whatif) == keeper.save_edit(whatif) == whatif.edit_id
        keeper.save_result(result)
        assert (store.scalar("SELECT count(*) FROM runs"), store.scalar("SELECT count(*) FROM steps")) == runs_before
    with open_store(settings) as store:  # reopened: the tables and rows are still there
        keeper = DuckWhatIfStore(store)
        assert keeper.edits() == [whatif] and keeper.edits("task-000/1") == []
        [back] = keeper.results(whatif.edit_id)
        assert back.record() == result.record()
        row = store.dicts("SELECT fields, command_f1, engine_spec FROM whatif_edits JOIN whatif_results USING (edit_id)")
        assert row == [{"fields": ["screen"], "command_f1": result.f1, "engine_spec": "transformers:tiny"}]
        with pytest.raises(EditError, match="no saved what-if"):
            keeper.get_edit("wi-missing")
        out = io.StringIO()
        assert export_jsonl(keeper, out) == 1
    [line] = out.getvalue().splitlines()
    record = json.loads(line)
    assert record["edit_id"] == whatif.edit_id and record["edits"][0]["new"] == NEW_SCREEN
    assert record["results"][0]["raw_output"] == result.raw_output and record["results"][0]["patch"] == result.patch


def test_session_keeper_stays_in_memory_with_a_cap(tmp_path, step):
    keeper = SessionWhatIfStore()
    old = field_text(step, "screen")
    for i in range(limits()["max_session_whatifs"]):
        keeper.save_edit(WhatIf(step.key, (FieldEdit("screen", old, f"screen {i}"),)))
    with pytest.raises(EditError, match="the cap"):
        keeper.save_edit(WhatIf(step.key, (FieldEdit("screen", old, "one more"),)))
    assert len(keeper.edits(step.key)) == limits()["max_session_whatifs"] and not keeper.shared


def test_public_settings_keep_visitor_edits_out_of_the_store(monkeypatch):
    monkeypatch.setenv("LAB_PUBLIC", "1")
    monkeypatch.delenv("LAB_WHATIF_SHARED", raising=False)
    assert Settings().whatif_shared is False
    monkeypatch.setenv("LAB_WHATIF_SHARED", "1")
    assert Settings().whatif_shared is True
    monkeypatch.delenv("LAB_PUBLIC")
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("LAB_WHATIF_SHARED")
    assert Settings().whatif_shared is True


def whatif_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", "whatif", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_cli_list_replay_export(tmp_path, step, whatif, tiny_model_dir):
    db = ["--db", str(tmp_path / "lab.duckdb"), "--results", str(tmp_path / "results")]
    with open_store(Settings(results_dir=tmp_path / "results", db_path=tmp_path / "lab.duckdb")) as store:
        DuckWhatIfStore(store).save_edit(whatif)
    out = whatif_cli(*db, "replay", whatif.edit_id, "--replay", str(EXCERPT), "--engine", "reference",
                     "--engine", f"transformers:{tiny_model_dir}?device=cpu", "--max-tokens", "8")
    assert out.returncode == 0, out.stderr
    assert f"{whatif.edit_id} task-000/0 on reference: original F1 1.0000 -> what-if F1 1.0000" in out.stdout
    assert out.stdout.count(whatif.edit_id) == 2
    out = whatif_cli(*db, "list")
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [(r["edit_id"], r["fields"], r["note"]) for r in rows] == [(whatif.edit_id, "screen", "longer screen")] * 2
    assert [r["engine"] for r in rows] == ["reference", f"transformers:{tiny_model_dir}?device=cpu"]
    assert rows[0]["command_f1"] == "1.0000" and rows[0]["answers_from_data"] == "True"
    target = tmp_path / "export" / "whatifs.jsonl"
    out = whatif_cli(*db, "export", "-o", str(target))
    assert out.returncode == 0 and "exported 1 what-if edit(s)" in out.stderr
    [record] = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["engine_spec"] for r in record["results"]] == [r["engine"] for r in rows]
    out = whatif_cli(*db, "replay", "wi-nope", "--engine", "reference", "--replay", str(EXCERPT))
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: no saved what-if 'wi-nope' (list them with `python -m lab whatif list`)") and "Traceback" not in out.stderr
