"""Issue 27 item 9: a `vllm:` row on vLLM's CPU backend says where it runs and its KV-cache budget
(no NVML reading there), from the moment the row exists, not "–"."""
from __future__ import annotations


def test_a_cpu_vllm_row_shows_cpu_and_its_kv_cache_budget(monkeypatch, tmp_path):
    from lab.engines.registry import create_engine
    from lab.workspace import entry_from_status
    from lab.ui.engines.tab import render_engine_table

    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    engine = create_engine(f"vllm:{tmp_path}?kv_cache_gb=1.5&name=vl")
    status = engine.server_status()  # what the pool's status row carries before and while the server starts
    row = {"name": "vl", "spec": engine.spec, "kind": engine.kind, "state": "loading", "server": status}
    html = render_engine_table([entry_from_status(row)])
    assert status["device"] == engine.device_text() and "CPU" in status["device"]
    assert f"<td>{engine.device_text()}</td>" in html
    assert "<td>KV cache 1.50 GiB of RAM (budget)</td>" in html
    assert "<td>–</td><td>–</td><td></td></tr>" not in html  # neither device nor memory is a dash


def test_rows_and_audit_say_architecture_context_dtype_and_flags_visitors_see_no_flags(tiny_model_dir, tmp_path):
    """Issue 24: per engine, the Engines table and the prompt audit show the model's architecture, the
    context and dtype it runs with and its preset; a managed server's flags are folded in its row for
    the owner, and a public deployment's visitor never gets them (they are the server's command line)."""
    import json

    from lab.data import load_replay
    from lab.engines.registry import create_engine
    from lab.ui.compare.audit_panel import column_audit
    from lab.ui.compare.render_audit import render_audit_body
    from lab.ui.engines.tab import render_engine_table
    from lab.workspace import LabContext, entry_from_status
    from lab.settings import Settings
    from tests.paths import EXCERPT

    architecture = json.loads((tiny_model_dir / "config.json").read_text())["architectures"][0]
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&max_model_len=4096&name=inproc")
    engine.load()
    try:
        row = {"name": "inproc", "spec": engine.spec, "kind": engine.kind, "state": "ready", "preset": None}
        entry = entry_from_status(row, engine)
        assert (entry.architecture, entry.context_length, entry.dtype) == (architecture, 4096, "float32")
        html = render_engine_table([entry])
        assert f"{architecture} · context 4,096 · float32" in html and "server flags" not in html
        ctx = LabContext(settings=Settings(results_dir=tmp_path, db_path=tmp_path / "lab.duckdb"))
        audit = column_audit(ctx, entry, load_replay(EXCERPT).steps[0], compute=True)
        assert f"{architecture} · context 4,096 · float32" in render_audit_body(audit)
    finally:
        engine.close()

    served = create_engine(f"transformers-serve:{tiny_model_dir}?device=cpu&name=ts")
    served.load()
    try:
        row = {"name": "ts", "spec": served.spec, "kind": served.kind, "state": "ready",
               "server": served.server_status()}
        entry = entry_from_status(row, served)
        assert entry.architecture == architecture and entry.dtype == "auto" and "--port" in entry.flags
        assert "server flags" in render_engine_table([entry]) and "--port" in render_engine_table([entry])
        public = LabContext(settings=Settings(results_dir=tmp_path, db_path=tmp_path / "lab.duckdb"))
        shown = public.shown_entry(entry)  # what a public deployment's visitor is sent
        assert shown.flags is None and "server flags" not in render_engine_table([shown])
        assert architecture in render_engine_table([shown])
    finally:
        served.close()
