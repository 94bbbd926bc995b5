"""Answers in flight (issue 41 item 2): an answer is generated once per (engine, step), whichever Generate
asked first; a second Generate awaits it, and a page that did not start it (a reload, the tab shown again)
shows it as in progress until it is in. A real lab with the tiny model in process."""
from __future__ import annotations

import threading
import time

import pytest

from lab.settings import Settings
from lab.ui.compare.inflight import Inflight
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def test_one_job_per_engine_and_step():
    inflight, gate, calls = Inflight(), threading.Event(), []

    def work():
        calls.append(1)
        gate.wait(10)
        return "answer"

    first = inflight.start("e", "t/0", None, work)
    again = inflight.start("e", "t/0", None, work)
    other = inflight.start("e", "t/1", None, lambda: "other")
    assert first is again and first is not other
    assert inflight.running("e", "t/0") is first and [j.step_key for j in inflight.running_on("t/0")] == ["t/0"]
    seen = []
    first.when_done(lambda job: seen.append(job.view))
    gate.set()
    assert first.done.wait(10) and other.done.wait(10)
    assert calls == [1] and seen == ["answer"] and first.view == "answer"
    assert inflight.running("e", "t/0") is None  # gone once done: a later Generate starts afresh
    late = []
    first.when_done(lambda job: late.append(job.view))  # after the end: called at once
    assert late == ["answer"]


def test_a_second_generate_and_a_reload_see_the_answer_in_flight(tiny_model_dir, tmp_path):
    from lab.serve import create_context
    from lab.ui.compare.answers import follow_views, generate_views
    from lab.ui.compare.handlers import step_outputs

    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"transformers:{tiny_model_dir}?device=cpu&max_tokens=300&name=slow"])
    try:
        assert ctx.pool.wait(timeout=300)
        engine = ctx.pool.get("slow")
        calls = []
        generate = engine.generate

        def counted(*args, **kwargs):
            calls.append(1)
            return generate(*args, **kwargs)

        engine.generate = counted
        key = ctx.step_keys()[0]
        first: list = []
        thread = threading.Thread(target=lambda: first.extend(generate_views(ctx, key)))
        thread.start()
        deadline = time.monotonic() + 60
        while engine.live_progress().snapshot() is None:
            assert time.monotonic() < deadline and thread.is_alive(), "the first Generate did not start"
            time.sleep(0.05)
        # a second Generate while the first streams: it awaits the same answer
        second: list = []
        other = threading.Thread(target=lambda: second.extend(generate_views(ctx, key)))
        other.start()
        # a page that did not start it (a reload): the column is in progress, not "not generated yet"
        assert 'data-state="running"' in step_outputs(ctx, key).columns_html
        assert engine.live_progress().snapshot() is not None, "the answer ended before the second Generate"
        followed = list(follow_views(ctx, key))
        thread.join(120)
        other.join(120)
        assert second[0][0].state == "running"  # its first paint: the answer already in flight
        assert calls == [1], "the answer was generated twice"
        assert followed and followed[-1][0].state == "ready"
        assert first[-1][0].state == second[-1][0].state == "ready"
        assert first[-1][0].raw_output == second[-1][0].raw_output
        assert list(follow_views(ctx, key)) == []  # nothing in flight: nothing to follow
    finally:
        ctx.pool.close_all()
