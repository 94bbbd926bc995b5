"""Batch on an engine whose run is already complete says so and keeps the file and its DuckDB run;
'start a new run' runs it again under a fresh name. Through the real Gradio server's HTTP API."""
from __future__ import annotations

import pytest

from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.helpers_store import excerpt_lab

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_finished_run_is_never_regenerated_silently(tmp_path):
    from gradio_client import Client

    with excerpt_lab(tmp_path) as ctx, serve_lab(ctx) as (_, url):
        settings = ctx.settings
        client = Client(url, verbose=False)
        task = ctx.replay.tasks[0]
        n = len(ctx.replay.steps_for_task(task))
        html = client.predict(["reference"], [task], [], [], True, "tinyB", False, api_name="/run_batch")
        assert "saved tinyB.json" in html
        path = settings.runs_dir / "tinyB.json"
        before = (path.read_bytes(), path.stat().st_mtime_ns)
        runs_before = ctx.query("SELECT run_id, imported_at FROM runs")

        html = client.predict(["reference"], [task], [], [], True, "tinyB", False, api_name="/run_batch")
        assert "already complete" in html and "tinyB.json" in html and "start a new run" in html
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
        after = ctx.query("SELECT run_id, imported_at FROM runs")
        assert after.equals(runs_before)  # the DuckDB run is untouched

        html = client.predict(["reference"], [task], [], [], True, "tinyB", True, api_name="/run_batch")
        assert "saved tinyB-2.json" in html and f"{n}/{n}" in html
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
        assert len(ctx.query("SELECT run_id FROM runs")) == len(runs_before) + 1
