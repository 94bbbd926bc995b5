"""Batch offers score-reference (issue 25): through the real Gradio server's HTTP API, a tiny in-process model
scores the reference answers of a task's steps; the file is a score-reference run in the store (its NLL per
token in the table), a finished one is kept and 'start a new run' writes NAME-2.reference.json; an engine
without a model is refused in its row, in one line (the cluster's run of it: tests/ui/test_sweep_ui.py)."""
from __future__ import annotations

import json

import pytest

from lab.settings import Settings
from lab.ui.batch.rows import ANSWERS, REFERENCE
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.helpers_store import make_results_dir

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_batch_scores_the_reference_keeps_finished_runs_and_refuses_engines_without_a_model(tiny_model_dir, tmp_path):
    from gradio_client import Client

    from lab.serve import create_context

    results = make_results_dir(tmp_path)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    spec = f"transformers:{tiny_model_dir}?device=cpu&max_tokens=4&name=tiny"
    ctx = create_context(settings, ["reference", spec])
    ctx.pool.wait()
    try:
        with serve_lab(ctx) as (_, url):
            client = Client(url, verbose=False)
            task = ctx.replay.tasks[0]
            n = len(ctx.replay.steps_for_task(task))
            html = client.predict(["tiny", "reference"], [task], [], [], True, "", False, REFERENCE,
                                  api_name="/run_batch")
            path = settings.runs_dir / "tiny.reference.json"
            assert "saved tiny.reference.json" in html and f"{n}/{n}" in html, html
            written = json.loads(path.read_text())
            nll = written["aggregate"]["ref_nll_per_token"]
            assert written["kind"] == "tb2lite-reference-likelihood" and len(written["per_step"]) == n and nll > 0
            assert f"reference NLL/token {nll:.4f}" in html
            assert "cannot score the reference (it has no model)" in html  # the reference engine's row
            assert not (settings.runs_dir / "tiny.json").exists()  # nothing generated
            stored = ctx.query("SELECT ref_nll_per_token, steps FROM reference_runs")
            assert len(stored) == 1 and stored.iloc[0]["ref_nll_per_token"] == pytest.approx(nll)

            before = path.read_bytes()
            html = client.predict(["tiny"], [task], [], [], True, "", False, REFERENCE, api_name="/run_batch")
            assert "already complete" in html and "tiny.reference.json" in html and path.read_bytes() == before
            html = client.predict(["tiny"], [task], [], [], True, "", True, REFERENCE, api_name="/run_batch")
            assert "saved tiny-2.reference.json" in html
            assert json.loads((settings.runs_dir / "tiny-2.reference.json").read_text())["aggregate"]["ref_nll_per_token"] \
                == pytest.approx(nll, abs=1e-6)  # the same model, the same steps: the same likelihood

            html = client.predict(["tiny"], [task], ["early"], [], True, "", False, ANSWERS, api_name="/run_batch")
            assert "saved tiny.json" in html, html  # the answers mode still replays (steps within the context)
    finally:
        ctx.pool.close_all()
