"""One visitor's vLLM engines hold a visitor-sized part of the vLLM memory budget (issue 40 item 3).

Before, a visitor's `vllm:` engine without its own share took all that was left of the budget, and every
other client's add was refused until it idled out (each Generate renewed it). Now the engines of one
client (all its sessions) hold at most `client_vllm_share` of each budget together (public_limits.yaml;
a preset's own share is cut to it too), and engines already running, the owner's, keep theirs.

The first test adds engines whose servers never start (the pool's start lock is held, so each waits its
turn in `loading`, holding its share as a starting server does); the second runs a real public lab
with visitor sessions and real `vllm serve` processes (vLLM's CPU backend: the budget is GiB of RAM for
KV caches)."""
from __future__ import annotations

import types

import pytest

from lab.engines import EnginePool, load_presets
from lab.engines.servers.gpu_budget import GpuBudgetError
from lab.errors import LabError
from tests.paths import EXCERPT

PRESETS = load_presets()
VISITOR = dict(visitor=True, client_share=0.25)


def _share(pool: EnginePool, name: str) -> float:
    return pool.get(name).memory_share()


@pytest.mark.parametrize("device,whole,part", [("cpu", 4.0, 1.0), ("gpu", 0.92, 0.23)])
def test_each_client_holds_its_part_and_running_engines_keep_theirs(monkeypatch, device, whole, part):
    monkeypatch.setenv("LAB_VLLM_DEVICE", device)
    monkeypatch.setenv("LAB_VLLM", "/nonexistent/vllm")
    pool = EnginePool(presets=PRESETS)
    unit = "kv_cache_gb" if device == "cpu" else "gpu_memory_utilization"
    try:
        with pool._start_lock:  # no server starts while the test holds it: every engine stays `loading`
            owner = pool.add(f"vllm:/nonexistent/owner?{unit}={part}")
            a = pool.add("vllm:/nonexistent/a", client="198.51.100.7", **VISITOR)
            assert _share(pool, a) == part  # not all that was left (3 GiB / 0.69)
            with pytest.raises(GpuBudgetError, match=rf"one visitor \(all its sessions\) may hold {part:g} .*25% of the "
                                                      rf"lab's budget of {whole:g}\); yours hold {part:g}"):
                pool.add("vllm:/nonexistent/a2", client="198.51.100.7", **VISITOR)
            own = pool.add(f"vllm:/nonexistent/c?{unit}={whole / 2}", client="203.0.113.9", **VISITOR)
            assert _share(pool, own) == part  # a preset's (or a SPEC's) own share is cut to the client's part
            b = pool.add("vllm:/nonexistent/b", client="192.0.2.1", **VISITOR)
            assert _share(pool, b) == pytest.approx(round(whole - 3 * part, 3), abs=0.002)  # the last of the budget
            assert _share(pool, owner) == part  # the owner's engine was never displaced
            with pytest.raises(GpuBudgetError, match="vLLM engines cannot fit in the lab's budget"):
                pool.add("vllm:/nonexistent/d", client="192.0.2.99", **VISITOR)
            pool.remove(a)  # client A unloads its engine: its part is free again
            again = pool.add("vllm:/nonexistent/a3", client="198.51.100.7", **VISITOR)
            assert _share(pool, again) == part
    finally:
        pool.close_all()


@pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
def test_visitors_of_a_public_lab_get_their_part_and_their_engine_answers(vllm_exe, vllm_model_dir, tmp_path,
                                                                          monkeypatch):
    """A public lab (LAB_PUBLIC, LAB_ALLOW_ENGINES) with the owner's vLLM engine of 1 GiB: visitor A's
    engine gets 1 GiB (25% of 4) and answers a Generate; A's second vLLM engine is refused in one line;
    visitor B, another client, still gets 1 GiB; the owner's engine keeps its share throughout."""
    import shutil

    import gradio as gr
    from gradio.context import LocalContext

    from lab.settings import Settings
    from lab.serve import create_context
    from lab.ui.compare.answers import generate_views
    from lab.ui.shell.session import serve_requests
    from tests.helpers_store import make_results_dir

    for key, value in {"LAB_VLLM": vllm_exe, "LAB_VLLM_DEVICE": "cpu", "HF_HUB_OFFLINE": "1",
                       "VLLM_NO_USAGE_STATS": "1", "LAB_LOG_DIR": str(tmp_path / "logs"),
                       "LAB_CLIENT_VLLM_SHARE": "0.25"}.items():
        monkeypatch.setenv(key, value)
    results = make_results_dir(tmp_path)
    model = results / "models" / "tiny"  # a visitor's model lies in the data folders (or is a Hub id)
    shutil.copytree(vllm_model_dir, model)
    common = "max_model_len=16384&max_tokens=4"  # what a visitor may set (visitor_options.yaml)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=tmp_path / "lab.duckdb",
                        cache_dir=tmp_path / "cache", replay_path=str(EXCERPT), public=True, allow_engine_loading=True)
    ctx = create_context(settings, [f"vllm:{model}?{common}&dtype=float32&kv_cache_gb=1&name=owner"], open_db=False)
    serve_requests(ctx)  # as the app does: the workspace asks Gradio who is asking

    def as_visitor(session: str, host: str):
        return LocalContext.request.set(gr.Request(session_hash=session, client=types.SimpleNamespace(host=host)))

    try:
        token = as_visitor("a", "198.51.100.7")
        try:
            a = ctx.add_engine(f"vllm:{model}?{common}&name=mine")
            assert ctx.pool.get(a).kv_cache_gb == 1.0
            with pytest.raises(LabError, match=r"may hold 1 GiB of RAM for KV caches \(25% of the lab's budget of 4\)"):
                ctx.add_engine(f"vllm:{model}?{common}&name=second")
            ctx.pool.wait(timeout=900)  # the owner's server, then the visitor's (one starts at a time)
            *_, views = generate_views(ctx, ctx.replay.steps[0].key)
            mine = next(v for v in views if v.name == a)
            assert mine.state == "ready" and mine.completion_tokens, mine.error
        finally:
            LocalContext.request.reset(token)
        token = as_visitor("b", "192.0.2.1")
        try:
            with ctx.pool._start_lock:  # B's share is what is checked: its server waits its turn and never starts
                b = ctx.add_engine(f"vllm:{model}?{common}&name=theirs")
                assert ctx.pool.get(b).kv_cache_gb == 1.0
                ctx.pool.remove(b)
        finally:
            LocalContext.request.reset(token)
        assert ctx.pool.get("owner").kv_cache_gb == 1.0
    finally:
        ctx.pool.close_all()
