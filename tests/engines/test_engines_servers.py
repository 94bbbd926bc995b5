"""Managed servers with real processes: the supervisor's life cycle on a real `transformers serve`
(the tiny model), early exits, timeouts, process-group stops, dying with the lab; the GPU
memory budget; the `vllm serve` command line of every preset against the pinned vLLM's flags."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import psutil
import pytest

from lab.engines import create_engine, load_presets
from lab.engines.servers import CRASHED, READY, STARTING, STOPPED, ManagedServer, ServerFailed, live_servers
from lab.engines.servers.gpu_budget import GpuBudgetError, GpuRequest, split_budget
from lab.engines.servers.transformers_serve import transformers_executable, transformers_serve_argv
from lab.engines.servers.vllm_server import adapter_rank, lora_rank_setting
from lab.errors import EngineSpecError
from tests.paths import REPO

FLAGS_FILE = REPO / "tests" / "data" / "vllm_serve_flags-0.32.0.txt"
PRESETS = load_presets()


def gone(pid: int, timeout: float = 10.0) -> bool:
    """True once `pid` no longer runs (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def python_server(tmp_path: Path, code: str, name: str = "py") -> ManagedServer:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(code))
    return ManagedServer(name, lambda port: [sys.executable, str(script), str(port)], tmp_path / f"{name}.log",
                         ready_timeout=20, stop_grace=2)


def test_transformers_serve_lifecycle_ready_crash_restart_stop(tiny_model_dir, tmp_path):
    server = ManagedServer(
        "tiny", lambda port: transformers_serve_argv(transformers_executable(), str(tiny_model_dir), port, device="cpu"),
        tmp_path / "logs" / "tiny.log", env={"HF_HUB_OFFLINE": "1"}, ready_timeout=180,
    )
    server.start()
    assert server.state == STARTING and server.pid and server.port
    assert server in live_servers()
    server.wait_ready()
    assert server.state == READY and server.ready_after_s > 0
    assert httpx.get(f"{server.base_url}/health", timeout=10).status_code == 200
    assert server.argv[1:3] == ["serve", str(tiny_model_dir)] and "--port" in server.argv
    assert server.log_path.read_text().startswith("=== ") and "lab starts:" in server.log_path.read_text()
    assert server.tail(5) and len(server.tail(5)) == 5

    first_pid = server.pid
    os.kill(first_pid, signal.SIGKILL)  # the server dies on its own
    deadline = time.monotonic() + 10
    while server.state != CRASHED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.state == CRASHED and server.exit_code == -9
    assert server.status_text() == "stopped: exit code -9 (SIGKILL)"
    assert server.failure_text().startswith("stopped: exit code -9 (SIGKILL) (log ")
    assert server not in live_servers()
    deadline = time.monotonic() + 5  # the lab's line follows the state by the group scan's time
    while "exited on its own" not in server.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    line = [ln for ln in server.log_path.read_text().splitlines() if "exited on its own" in ln][-1]
    assert f"(pid {first_pid}) exited on its own with code -9 (SIGKILL); " in line  # and what was left, or that none was

    server.restart()
    assert server.state == READY and server.pid != first_pid
    assert httpx.get(f"{server.base_url}/health", timeout=10).status_code == 200
    second_pid = server.pid
    server.stop()
    assert server.state == STOPPED and gone(second_pid) and server not in live_servers()
    assert server.process_ids() == []


def test_a_crashed_server_leaves_the_live_list_with_its_state(tmp_path, monkeypatch):
    """The moment a server reads crashed it is no longer live: the lab's scan of what its group left
    (which takes a while on a loaded machine) comes after both, never between them."""
    from lab.engines.servers import supervisor

    seen_during_scan: list[tuple[str, bool]] = []
    scan = supervisor.group_members

    def slow_scan(pid: int) -> list[str]:
        seen_during_scan.append((server._state, server in live_servers()))
        time.sleep(0.5)
        return scan(pid)

    monkeypatch.setattr(supervisor, "group_members", slow_scan)
    server = python_server(tmp_path, """
        import time
        time.sleep(0.3)
    """)
    server.start()
    deadline = time.monotonic() + 20
    while server.state != CRASHED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.state == CRASHED and server not in live_servers()
    deadline = time.monotonic() + 5
    while not seen_during_scan and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen_during_scan and seen_during_scan[0] == (CRASHED, False)


def test_server_that_exits_early_reports_its_log(tmp_path):
    server = python_server(tmp_path, """
        import sys
        print("loading model ...")
        print("ValueError: unrecognized arguments: --bogus-flag", file=sys.stderr)
        sys.exit(3)
    """)
    server.start()
    with pytest.raises(ServerFailed) as err:
        server.wait_ready()
    message = str(err.value)
    assert "stopped: exit code 3" in message and "unrecognized arguments: --bogus-flag" in message
    assert "loading model" in message and "Traceback" not in message
    assert server.state == CRASHED and server.exit_code == 3


def test_server_that_never_answers_is_stopped_after_the_timeout(tmp_path):
    server = python_server(tmp_path, """
        import time
        print("still loading", flush=True)
        time.sleep(120)
    """)
    server.start()
    pid = server.pid
    with pytest.raises(ServerFailed, match=r"did not answer /health or /v1/models within 2 s"):
        server.wait_ready(timeout=2)
    assert server.state == STOPPED and gone(pid)


def test_a_server_is_asked_often_until_it_answers_then_calmly_until_it_is_ready(tmp_path):
    """Refused connections are retried every 0.1 s (a start is seen at once); a server that answers but is
    not ready yet (503) is asked every 0.5 s, since each ask is a line of its log."""
    server = python_server(tmp_path, """
        import http.server, sys, time
        time.sleep(1.0)  # not listening yet: connections refused
        began = time.monotonic()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                ready = time.monotonic() - began > 3.0
                self.send_response(200 if ready else 503)
                self.end_headers()
                print("asked", self.path, flush=True)

        http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
    """)
    server.start()
    try:
        server.wait_ready(timeout=20)
        asks = [line for line in server.log_path.read_text().splitlines() if line.startswith("asked")]
        # 3 s of 503s at one round (both paths) per 0.5 s: about 12 asks; every 0.1 s would be about 60
        assert 4 <= len(asks) <= 20, len(asks)
        assert server.ready_after_s < 1.0 + 3.0 + 1.0
    finally:
        server.stop()


def test_stop_kills_the_whole_process_group_even_when_term_is_ignored(tmp_path):
    server = python_server(tmp_path, """
        import http.server, signal, subprocess, sys
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen([sys.executable, "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
        print("child", child.pid, flush=True)

        class Health(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/health" else 404)
                self.end_headers()

        http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
    """, name="stubborn")
    server.start()
    server.wait_ready()
    pids = server.process_ids()
    assert len(pids) == 2  # the server and its child (like vLLM's engine core)
    started = time.monotonic()
    server.stop(grace=1)
    assert all(gone(pid) for pid in pids)
    assert time.monotonic() - started < 15 and server.state == STOPPED


def test_servers_die_with_the_lab_process(tmp_path):
    """A lab killed with SIGKILL (no atexit, no handler) still leaves no server: PDEATHSIG."""
    lab = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, threading, time
            from lab.engines.servers import ManagedServer
            server = ManagedServer("sleeper", lambda port: [sys.executable, "-m", "http.server", str(port),
                                   "--bind", "127.0.0.1"], {str(tmp_path / 'sleeper.log')!r}, ready_paths=("/",))
            threading.Thread(target=server.start).start()  # from a short-lived thread on purpose
            time.sleep(1)
            server.wait_ready(30)
            print(server.pid, flush=True)
            time.sleep(300)
        """)],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )
    try:
        server_pid = int(lab.stdout.readline())
        assert not gone(server_pid, timeout=1)  # the starting thread ended; the server lives on
        lab.kill()
        lab.wait(10)
        assert gone(server_pid), "the server outlived the lab"
    finally:
        if lab.poll() is None:
            lab.kill()


def test_gpu_budget_splits_and_refuses():
    shares = split_budget([GpuRequest("a", 0), GpuRequest("b", 0), GpuRequest("c", 0)], budget=0.92)
    assert shares == {"a": 0.306, "b": 0.306, "c": 0.306} and sum(shares.values()) <= 0.92
    mixed = split_budget([GpuRequest("big", 0, 0.5), GpuRequest("x", 0), GpuRequest("y", 1)],
                         held={0: [("running", 0.2)]}, budget=0.92)
    assert mixed == {"big": 0.5, "x": 0.22, "y": 0.92}
    with pytest.raises(GpuBudgetError, match=r"GPU 0: .*held or asked: 'running' 0.9.*\?gpu_memory_utilization="):
        split_budget([GpuRequest("late", 0)], held={0: [("running", 0.9)]}, budget=0.92)
    with pytest.raises(GpuBudgetError, match=r"the shares add up to 1.2"):
        split_budget([GpuRequest("a", 0, 0.6), GpuRequest("b", 0, 0.6)], budget=0.92)


def test_pool_gives_vllm_engines_their_share_and_refuses_what_cannot_fit(monkeypatch):
    from lab.engines import EnginePool

    monkeypatch.setenv("LAB_VLLM_DEVICE", "gpu")  # the GPU budget, on a machine without one
    pool = EnginePool(presets=PRESETS)
    specs = ["vllm:/nonexistent/a", "vllm:/nonexistent/b", "vllm:/nonexistent/c?gpu=1",
             "vllm:/nonexistent/d?gpu_memory_utilization=0.3"]
    names = pool.add_many(specs)
    shares = {n: pool.get(n).gpu_memory_utilization for n in names}
    assert shares == {"a": 0.31, "b": 0.31, "c": 0.92, "d": 0.3}
    assert pool.get("c").server_env() == {"CUDA_VISIBLE_DEVICES": "1"}
    assert pool.wait(timeout=30)
    status = {row["name"]: row for row in pool.status()}
    assert status["a"]["state"] == "failed" and "does not exist" in status["a"]["error"]
    with pytest.raises(EngineSpecError, match="GPU 1: vLLM engines cannot fit"):  # failed ones hold nothing…
        pool.add("vllm:/nonexistent/e?gpu=1&gpu_memory_utilization=0.95")
    assert pool.add("vllm:/nonexistent/e") == "e"  # … so GPU 0's budget is free again
    pool.close_all()


def vllm_flags() -> set[str]:
    lines = FLAGS_FILE.read_text().splitlines()
    return {line.strip() for line in lines if line.startswith("--")}


@pytest.mark.parametrize("key", sorted(PRESETS))
def test_vllm_serve_argv_of_every_preset_uses_flags_of_the_pinned_vllm(key, tmp_path):
    preset = PRESETS[key]
    engine = create_engine(f"vllm:{key}?max_num_seqs=128&enable_chunked_prefill=false&enforce_eager=false", presets=PRESETS)
    engine.set_gpu_memory_utilization(0.45)
    if preset.lora:
        adapter = tmp_path / "adapter"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text('{"r": 16, "rank_pattern": {"q_proj": 48}}')
        engine.adapter = (engine.lora_name, str(adapter), adapter_rank(adapter))
    argv = engine.server_argv(8123)
    assert argv[:3] == ["vllm", "serve", preset.hf_id] or argv[1:3] == ["serve", preset.hf_id]
    flags = [a for a in argv if a.startswith("--")]
    unknown = sorted(set(flags) - vllm_flags())
    assert not unknown, f"{key}: flags unknown to vLLM 0.32.0: {unknown}"
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert pairs["--max-model-len"] == "49152" and pairs["--gpu-memory-utilization"] == "0.45"
    assert pairs["--dtype"] == "bfloat16" and pairs["--tensor-parallel-size"] == "1"
    assert pairs["--generation-config"] == "vllm" and pairs["--served-model-name"] == key
    assert pairs["--max-num-seqs"] == "128" and "--no-enable-chunked-prefill" in argv and "enforce-eager" not in str(argv)
    assert "--enable-prefix-caching" in argv and "--trust-remote-code" not in argv
    assert ("--language-model-only" in argv) == (key != "lfm25-8b-a1b-sft")
    if preset.lora:
        assert pairs["--max-lora-rank"] == "64" and "--enable-lora" in argv  # rank_pattern 48 -> 64
        assert pairs["--lora-modules"] == f"{engine.lora_name}={tmp_path / 'adapter'}"
        assert engine.served_model() == engine.lora_name
    else:
        assert "--enable-lora" not in argv and engine.served_model() == key


def test_lora_rank_rounds_up_to_sizes_vllm_allows():
    assert [lora_rank_setting(r) for r in (1, 4, 8, 9, 33, 300, 512)] == [1, 8, 8, 16, 64, 320, 512]
    with pytest.raises(Exception, match="larger than vLLM supports"):
        lora_rank_setting(1024)


def test_vllm_engine_options_and_executable(monkeypatch):
    monkeypatch.setenv("LAB_VLLM", "/opt/vllm-env/bin/vllm")
    engine = create_engine("vllm:org/Model-7B?pipeline_parallel_size=2&concurrency=16", presets=PRESETS)
    engine.set_gpu_memory_utilization(0.9)
    argv = engine.server_argv(9000)
    assert argv[0] == "/opt/vllm-env/bin/vllm" and engine.concurrency == 16
    assert argv[argv.index("--pipeline-parallel-size") + 1] == "2" and "--trust-remote-code" not in argv
    with pytest.raises(EngineSpecError, match="only a preset that declares"):
        create_engine("vllm:org/Model-7B?trust_remote_code=true", presets=PRESETS)
    assert create_engine("vllm:qwen35-2b-sft", presets=PRESETS).concurrency == 64
    assert create_engine("transformers-serve:/m", presets=PRESETS).concurrency == 4


def test_only_a_vllm_server_with_the_labs_own_tokenizer_gets_prompts_as_token_ids(monkeypatch):
    """vLLM tokenizes a text with the tokenizer the lab renders with (the model's, or `tokenizer=`, which
    its server gets too): it is sent the ids; another tokenizer mode, `transformers serve` and a remote
    server (whose tokenizer the lab cannot know) get the text."""
    monkeypatch.setenv("LAB_VLLM", "/opt/vllm-env/bin/vllm")
    assert create_engine("vllm:org/Model-7B", presets=PRESETS).prompt_as_ids()
    own = create_engine("vllm:org/Model-7B?tokenizer=org/Tok", presets=PRESETS)
    argv = own.server_argv(9000)
    assert own.prompt_as_ids() and argv[argv.index("--tokenizer") + 1] == "org/Tok"
    assert not create_engine("vllm:org/Model-7B?tokenizer_mode=mistral", presets=PRESETS).prompt_as_ids()
    assert not create_engine("transformers-serve:/m", presets=PRESETS).prompt_as_ids()
    assert not create_engine("openai:http://127.0.0.1:9/v1#m", presets=PRESETS).prompt_as_ids


def test_engines_table_shows_server_state_port_pid_memory_and_log_tail():
    from lab.workspace import EngineEntry
    from lab.ui.engines.tab import render_engine_table

    ready = EngineEntry("vllm:qwen35-2b-sft", "qwen", "vllm", "ready", server={
        "state": "ready", "pid": 4242, "port": 8123, "gpu_memory_gb": 17.25, "tail": []})
    crashed = EngineEntry("transformers-serve:/m", "tiny", "transformers-serve", "crashed",
                          error="stopped: exit code -9 (SIGKILL) (log /logs/tiny.log)\nINFO: last <line>",
                          server={"state": "crashed", "pid": 99, "port": 8124, "gpu_memory_gb": None, "tail": ["x"]})
    waiting = EngineEntry("vllm:/m", "m", "vllm", "loading", server={"state": "waiting to start", "tail": []})
    html = render_engine_table([ready, crashed, waiting, EngineEntry("reference", "reference", "reference", "ready")])
    row = html.split('<tr data-engine="qwen">')[1].split("</tr>")[0]
    assert "<td data-port>8123</td>" in row and "<td data-pid>4242</td>" in row and "17.25 GB" in row
    row = html.split('<tr data-engine="tiny">')[1].split("</tr>")[0]
    assert 'data-state="crashed"' in row and "<td data-pid>–</td>" in row and "<td>none</td>" in row
    assert "stopped: exit code -9 (SIGKILL)" in row and "last &lt;line&gt;" in row
    assert 'data-state="waiting to start"' in html.split('<tr data-engine="m">')[1]


def test_tensor_parallel_engines_are_charged_on_every_gpu_and_gpu_lists_match_tp(monkeypatch):
    from lab.engines import EnginePool

    monkeypatch.setenv("LAB_VLLM_DEVICE", "gpu")
    pool = EnginePool(presets=PRESETS)
    names = pool.add_many(["vllm:/nonexistent/tp?tensor_parallel_size=2&gpu=0,1&gpu_memory_utilization=0.6",
                           "vllm:/nonexistent/one?gpu=1"])
    assert pool.get(names[0]).server_env()["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert pool.get(names[1]).gpu_memory_utilization == 0.32  # GPU 1 already holds 0.6 of the tp engine
    assert "--tensor-parallel-size" in pool.get(names[0]).server_argv(8000)
    with pytest.raises(EngineSpecError, match="GPU 0: vLLM engines cannot fit.*'tp2' 0.6.*'big' 0.5"):
        pool.add_many(["vllm:/nonexistent/tp2?tensor_parallel_size=2&gpu=0,1&gpu_memory_utilization=0.6",
                       "vllm:/nonexistent/big?gpu=0&gpu_memory_utilization=0.5"])
    with pytest.raises(EngineSpecError, match="gpu lists 3 GPUs but tensor_parallel_size is 2"):
        pool.add("vllm:/nonexistent/x?tensor_parallel_size=2&gpu=0,1,2")
    with pytest.raises(EngineSpecError, match="gpu must be a GPU index or a list"):
        pool.add("vllm:/nonexistent/x?tensor_parallel_size=2&gpu=0,a")
    pool.close_all()


def test_vllm_on_cpu_shares_ram_for_kv_caches_and_refuses_what_does_not_fit(monkeypatch):
    from lab.engines import EnginePool

    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    pool = EnginePool(presets=PRESETS)
    a, b = pool.add_many(["vllm:/nonexistent/a", "vllm:/nonexistent/b?kv_cache_gb=1"])
    engine = pool.get(a)
    with pytest.raises(EngineSpecError, match=r"CPU \(vLLM's CPU backend\): vLLM engines cannot fit .*kv_cache_gb"):
        pool.add_many(["vllm:/nonexistent/c?kv_cache_gb=3", "vllm:/nonexistent/d?kv_cache_gb=2"])
    assert engine.kv_cache_gb == 3.0  # the budget (4 GiB) less b's 1 GiB
    argv = engine.server_argv(8000)
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == str(3 * 2**30)
    assert "--gpu-memory-utilization" not in argv
    assert engine.server_env()["VLLM_CPU_KVCACHE_SPACE"] is None  # unset: the user's value would override the flag
    assert "KV cache 3.0 GiB" in engine.device_text()
    pool.close_all()


def test_vllm_api_key_goes_to_the_server_environment_and_the_client_never_the_argv(monkeypatch):
    from lab.engines.registry import create_engine

    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    engine = create_engine("vllm:/nonexistent/a?api_key=s3cret", presets=PRESETS)
    assert engine.server_env()["VLLM_API_KEY"] == "s3cret"
    assert engine.client_options() == {"api_key": "s3cret"}
    assert "s3cret" not in " ".join(engine.server_argv(8000))
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    assert create_engine("vllm:/nonexistent/a", presets=PRESETS).client_options() == {"api_key": "from-env"}


GROUP_CMD = ["bash", "-c", "sleep 300 & sleep 300 & wait"]  # a leader with children in its group, never ready


def test_a_crash_kills_what_is_left_of_the_group_and_the_log_says_why(tmp_path):
    from lab.engines.servers.supervisor import ManagedServer

    server = ManagedServer("grp", lambda port: GROUP_CMD, tmp_path / "grp.log", ready_timeout=60)
    server.start()
    try:
        leader = psutil.Process(server.pid)
        deadline = time.monotonic() + 10
        while len(leader.children()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = [c.pid for c in leader.children()]
        assert len(children) == 2
        os.kill(server.pid, signal.SIGKILL)  # the leader only, as `kill -9 API_SERVER` does
        assert all(gone(pid, timeout=5) for pid in children), "the children outlived their crashed leader"
        assert server.state == "crashed" and server.exit_code == -9
        last = server.tail(1)[0]
        assert "exited on its own with code -9 (SIGKILL); killed the 2 process(es) left in its group" in last
        assert "stopped: exit code -9 (SIGKILL)" in server.failure_text()
    finally:
        server.stop(grace=1)


def test_stopping_a_server_that_is_still_starting_kills_its_group_and_fails_the_wait(tmp_path):
    import threading

    from lab.engines.servers.supervisor import ManagedServer, ServerFailed

    server = ManagedServer("starting", lambda port: GROUP_CMD, tmp_path / "s.log", ready_timeout=120)
    server.start()
    pgid = server.pid
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            server.wait_ready()
        except ServerFailed as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.0)
    started = time.monotonic()
    server.stop(grace=2)
    waiter.join(10)
    assert not waiter.is_alive() and errors and "stopped" in str(errors[0])
    assert time.monotonic() - started < 8
    from lab.engines.servers.supervisor import group_members

    assert not group_members(pgid) and server.state == "stopped"


def test_vllm_max_model_len_is_capped_at_the_models_own_context(monkeypatch, short_context_model_dir):
    """Found with the real Gemma 3 270M (32768 positions): the defaults' 49152 made `vllm serve` refuse to
    start. Without a SPEC's max_model_len the lab passes the model's own context; an asked one is kept."""
    import sys

    monkeypatch.setenv("LAB_VLLM", sys.executable)  # prepare() checks the executable exists; nothing is started
    monkeypatch.setenv("LAB_VLLM_DEVICE", "cpu")
    engine = create_engine(f"vllm:{short_context_model_dir}", presets=PRESETS)
    assert engine.settings["max_model_len"] == 49152  # the TB2-lite default, until the model is read
    engine.prepare()
    argv = engine.server_argv(9000)
    assert argv[argv.index("--max-model-len") + 1] == "4096" and engine.configured_max_model_len() == 4096
    asked = create_engine(f"vllm:{short_context_model_dir}?max_model_len=8192", presets=PRESETS)
    asked.prepare()
    assert asked.server_argv(9000)[asked.server_argv(9000).index("--max-model-len") + 1] == "8192"
    hub = create_engine("vllm:org/not-in-any-cache", presets=PRESETS)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.model_source = "org/not-in-any-cache"
    hub.fit_context_to_model()  # an id with no local config keeps the default: nothing is downloaded
    assert hub.settings["max_model_len"] == 49152


def test_a_managed_engine_loads_its_rendering_tokenizer_while_its_server_starts(tiny_model_dir, monkeypatch):
    """The tokenizer that renders prompts loads on a thread of its own from the server's start, not
    after the server answers (1.6 s of a Qwen3.5 start on this CPU), and only once."""
    import lab.engines.loading as loading

    calls: list[tuple[float, float]] = []
    real = loading.rendering_tokenizer

    def recorded(source: str):
        began = time.monotonic()
        tokenizer = real(source)
        calls.append((began, time.monotonic()))
        return tokenizer

    monkeypatch.setattr(loading, "rendering_tokenizer", recorded)
    engine = create_engine(f"transformers-serve:{tiny_model_dir}?name=early-tokenizer")
    try:
        engine.load()
        answered = engine.server.started_at + engine.server.ready_after_s
        assert len(calls) == 1, "the client loaded the tokenizer a second time"
        assert calls[0][0] < answered and calls[0][1] < answered, (calls, answered)
        assert engine.tokenizer is not None and engine.client.tokenizer is engine.tokenizer
        first = engine.tokenizer
        engine.restart()  # the same source: the tokenizer is kept, not loaded again
        assert len(calls) == 1 and engine.tokenizer is first and engine.client.tokenizer is first
    finally:
        engine.close()


def test_the_early_tokenizer_of_a_visitors_engine_loads_as_a_visitor(tiny_model_dir, tmp_path, monkeypatch):
    """The loading thread carries the visitor's rule: an ORG/NAME is a Hub id, never the folder of
    that name in the working directory (which the lab's own engine may read)."""
    import shutil

    from lab.engines.loading import hub_ids_only, rendering_tokenizer_soon

    shutil.copytree(tiny_model_dir, tmp_path / "someorg" / "tokenizer")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert rendering_tokenizer_soon("someorg/tokenizer").result(timeout=60) is not None
    with hub_ids_only(True):
        visitors = rendering_tokenizer_soon("someorg/tokenizer")
    assert visitors.result(timeout=60) is None


def test_a_second_signal_during_the_exit_handler_does_not_hang_the_lab():
    """A second SIGTERM (or Ctrl-C) arriving while the exit handler reads the live servers runs the handler
    again on the same thread, inside the first: it must not wait for the lock its own thread holds (a
    `python app.py` sent TERM twice hung there for good)."""
    import threading

    from lab.engines.servers import supervisor

    def nested() -> None:
        with supervisor._registry._lock:  # the first handler, inside live()
            supervisor.stop_all()  # the second signal's handler on the same thread

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


# A lab process with one managed server whose exit takes a while: an atexit function registered after the exit
# handlers (so it runs first) stands in for a slow close of the results store. Arguments: FORCE_AFTER_S, the
# server's Python code, its log file, the close's seconds. It prints the server's pid once the server answers.
SLOW_EXIT_LAB = """
    import atexit, sys, time
    from lab.engines.servers import ManagedServer, install_exit_handlers, supervisor
    supervisor.FORCE_AFTER_S = float(sys.argv[1])
    install_exit_handlers()
    server = ManagedServer("sleeper", lambda port: [sys.executable, "-c", sys.argv[2], str(port)], sys.argv[3],
                           ready_paths=("/",))
    server.start()
    server.wait_ready(30)

    @atexit.register
    def slow_close():
        time.sleep(float(sys.argv[4]))
        print("closed", flush=True)

    print(server.pid, flush=True)
    time.sleep(300)
"""
HTTP_SERVER = "import http.server, sys; http.server.test(http.server.SimpleHTTPRequestHandler, port=int(sys.argv[1]), bind='127.0.0.1')"
STUBBORN_SERVER = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + HTTP_SERVER


def slow_exit_lab(tmp_path: Path, force_after: float, server_code: str, close_s: float) -> tuple[subprocess.Popen, int]:
    lab = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SLOW_EXIT_LAB), str(force_after), server_code,
                            str(tmp_path / "sleeper.log"), str(close_s)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    return lab, int(lab.stdout.readline())


def test_a_second_ctrl_c_or_sigterm_while_the_lab_stops_lets_the_exit_finish_without_a_traceback(tmp_path):
    """Ctrl-C pressed twice (or TERM sent twice) raised a second KeyboardInterrupt or SystemExit inside the
    first one's exit: a traceback, and the results store's close cut short. Now the repeat says one line and
    the exit goes on to its end."""
    lab, server_pid = slow_exit_lab(tmp_path, 10.0, HTTP_SERVER, close_s=1.5)
    try:
        lab.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # inside the slow close
        lab.send_signal(signal.SIGINT)
        lab.send_signal(signal.SIGTERM)
        out, err = lab.communicate(timeout=30)
    finally:
        lab.kill()
    assert lab.returncode == 128 + signal.SIGTERM, err
    assert out.split() == ["closed"] and "Traceback" not in err, err
    assert "already stopping; a SIGINT more than 10 s after the first ends the lab at once" in err
    assert gone(server_pid)


def test_a_repeat_after_force_after_s_ends_a_stuck_exit_at_once_and_kills_the_servers(tmp_path):
    """A server that ignores SIGTERM holds the first signal's exit for its stop grace; a repeat after
    FORCE_AFTER_S (here 0.5 s) kills the servers' process groups and ends the lab with no traceback."""
    lab, server_pid = slow_exit_lab(tmp_path, 0.5, STUBBORN_SERVER, close_s=0)
    try:
        started = time.monotonic()
        lab.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert lab.poll() is None  # still waiting for the stubborn server
        lab.send_signal(signal.SIGTERM)
        out, err = lab.communicate(timeout=30)
        took = time.monotonic() - started
    finally:
        lab.kill()
    assert lab.returncode == 128 + signal.SIGTERM and took < 4.0, (took, err)  # the stop grace is 5 s
    assert "ending it now" in err and "Traceback" not in err and "closed" not in out, err
    assert gone(server_pid, timeout=2)
