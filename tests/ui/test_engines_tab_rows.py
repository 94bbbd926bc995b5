"""Issue 27 item 9: a `vllm:` row on vLLM's CPU backend says where it runs and its KV-cache budget
(no NVML reading there), from the moment the row exists, not "–"."""
from __future__ import annotations


def test_a_cpu_vllm_row_shows_cpu_and_its_kv_cache_budget(monkeypatch, tmp_path):
    from lab.engines.registry import create_engine
    from lab.ui.shell.context import entry_from_status
    from lab.ui.engines.engines_tab import render_engine_table

    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    engine = create_engine(f"vllm:{tmp_path}?kv_cache_gb=1.5&name=vl")
    status = engine.server_status()  # what the pool's status row carries before and while the server starts
    row = {"name": "vl", "spec": engine.spec, "kind": engine.kind, "state": "loading", "server": status}
    html = render_engine_table([entry_from_status(row)])
    assert status["device"] == engine.device_text() and "CPU" in status["device"]
    assert f"<td>{engine.device_text()}</td>" in html
    assert "<td>KV cache 1.50 GiB of RAM (budget)</td>" in html
    assert "<td>–</td><td>–</td><td></td></tr>" not in html  # neither device nor memory is a dash
