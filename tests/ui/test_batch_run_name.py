"""A Batch run name too long for a file name is one line in its row (it was an OSError that left
the row at "waiting"), and nothing is written. Through the real Gradio server's HTTP API. Opening the tab
keeps the engines ticked meanwhile."""
from __future__ import annotations

import pytest

from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT
from tests.helpers_store import excerpt_lab

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_an_overlong_run_name_is_one_line(tmp_path):
    from gradio_client import Client

    from lab.runs.replay import run_name_max

    with excerpt_lab(tmp_path) as ctx, serve_lab(ctx) as (_, url):
        settings = ctx.settings
        client = Client(url, verbose=False)
        task = ctx.replay.tasks[0]
        settings.runs_dir.mkdir(parents=True, exist_ok=True)
        before = sorted(p.name for p in settings.runs_dir.iterdir())
        for name in ("n" * 300, "a b" * 100, "x" * (run_name_max() + 1)):
            job = client.submit(["reference"], [task], [], [], True, name, False, api_name="/run_batch")
            html = job.result(timeout=120)
            assert "waiting" not in html and "running" not in html, html[-800:]
            assert f"give at most {run_name_max()}" in html and "Error" not in html, html[-800:]
        assert sorted(p.name for p in settings.runs_dir.iterdir()) == before
        longest = "y" * run_name_max()
        html = client.predict(["reference"], [task], [], [], True, longest, False, api_name="/run_batch")
        assert f"saved {longest}.json" in html


def test_opening_the_tab_keeps_a_tick_made_while_its_refresh_was_on_its_way(tmp_path):
    """The tab's refresh answers with the engines ready now; it sends the ticks back only to drop an engine no
    longer ready (it once sent back the ticks of the moment the tab opened, unticking one made since)."""
    from lab.ui.batch.tab import refresh_batch

    with excerpt_lab(tmp_path) as ctx:
        for ticked in ([], ["reference"]):
            engines = refresh_batch(ctx, ticked, [], [], [])[0]
            assert engines["choices"] == ["reference"] and "value" not in engines  # the page's ticks stay
        engines = refresh_batch(ctx, ["reference", "unloaded"], [], [], [])[0]
        assert engines["value"] == ["reference"]
