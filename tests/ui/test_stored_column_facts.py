"""A stored column shows the template status and token count its run recorded; a lab run named `tinyB`
on a model folder called `tiny` keeps its name in the store (Results, Triage)."""
from __future__ import annotations

import pytest

from lab.data import load_replay
from lab.engines.registry import create_engine
from lab.runs.pipeline import run_steps
from lab.resultfiles.files import write_result_file
from lab.store import open_store
from lab.store.importer import import_path
from lab.ui.compare.render_html import render_prompt_block
from lab.ui.compare.step_view import engine_view_from_result
from tests.paths import EXCERPT
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _chat_template_run(path, name: str, model_path: str) -> dict:
    """A lab-made result (engine_spec set) whose steps were rendered with a chat template."""
    base = write_stored_run(path, name)
    for i, row in enumerate(base["per_step"]):
        row["template_status"] = "chat_template"
        row["prompt_tokens"] = 1000 + 7 * i
        row["completion_tokens"] = 40 + i
    result = {**base, "model_path": model_path, "model_short": name, "model": name,
              "engine_spec": f"openai:{model_path}", "prompt_template": {"template_status": "chat_template"}}
    write_result_file(path, result)
    return result


def test_stored_column_shows_recorded_template_and_tokens(tmp_path):
    result = _chat_template_run(tmp_path / "chat.json", "chatrun", "/models/chatrun")
    engine = create_engine(f"stored:{tmp_path / 'chat.json'}")
    engine.load()
    replay = load_replay(str(EXCERPT))
    rows = {f"{r['task_id']}/{r['step_idx']}": r for r in result["per_step"]}
    for step_result in run_steps(engine, replay.steps[:3]):
        view = engine_view_from_result(engine.spec, "chatrun", step_result, "stored")
        row = rows[step_result.step.key]
        assert view.prompt_status == "chat_template"
        assert view.prompt_tokens == row["prompt_tokens"] and view.completion_tokens == row["completion_tokens"]
        html = render_prompt_block(view)
        assert "chat_template" in html and f"{row['prompt_tokens']:,} tokens" in html
        assert "raw_fallback" not in html and "tokens: n/a" not in html


def test_stored_column_without_records_says_so(tmp_path):
    bare = write_stored_run(tmp_path / "bare.json", "bare")
    for row in bare["per_step"]:  # an older file: no template status recorded per step
        row.pop("template_status", None)
    write_result_file(tmp_path / "bare.json", bare)
    engine = create_engine(f"stored:{tmp_path / 'bare.json'}")
    engine.load()
    step_result = next(iter(run_steps(engine, load_replay(str(EXCERPT)).steps[:1])))
    view = engine_view_from_result(engine.spec, "bare", step_result, "stored")
    assert view.prompt_status == "not recorded"


def test_lab_run_named_tinyB_keeps_its_name(tmp_path):
    results = make_results_dir(tmp_path)
    _chat_template_run(results / "runs" / "tinyB.json", "tinyB", str(tmp_path / "models" / "tiny"))
    write_stored_run(results / "runs" / "plain.json", "plain")  # published-style: no engine_spec
    store = open_store(tmp_path / "lab.duckdb", results)
    try:
        import_path(store, results / "runs")
        names = set(store.query("SELECT display_name FROM runs")["display_name"])
        assert "tinyB" in names and "tiny" not in names
        from lab.triage.db import query_df  # Triage reads the same names
        assert "tinyB" in set(query_df(store, "SELECT display_name FROM runs")["display_name"])
    finally:
        store.close()
