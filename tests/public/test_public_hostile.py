"""A public Space keeps its promises against a hostile visitor (issue 18).

The lab runs as a real `python app.py` in public mode with model engines allowed
(LAB_PUBLIC=1, LAB_ALLOW_ENGINES=1); visitors are anonymous gradio_client sessions; a real
HTTP server on 127.0.0.1 counts what an `openai:` engine would send it.
"""
from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.helpers_app import app_process, lab_env
from tests.paths import EXCERPT
from tests.public.test_public_mode import engine_names, visitor
from tests.helpers_store import make_results_dir
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")

# Every endpoint the app lists (view_api), and whether a visitor may call it. A new endpoint
# fails this test until it is classified here (and checked below when visitors are refused).
VISITOR_MAY_CALL = {
    "/show_step": True, "/prev_step": True, "/next_step": True, "/generate": True, "/prompt_audit": True,
    "/add_engine": True,  # checked: visitor options, paths, hosts, per-session share
    "/unload_engine": True, "/restart_engine": True,  # only the visitor's own engines
    "/run_batch": False,  # writes into results/
    "/run_sweep": False,  # the owner's Ray cluster; writes into results/
    "/run_race": False,  # the same cluster, the same results/
    "/stop_batch": True,  # stops only the caller's session
    "/add_runs": True,  # stored runs of results/ as the visitor's own columns
    "/sample_step": True,  # samples stay in the visitor's session
    "/samples_head_to_head": True, "/unstable_steps": True,  # read the store
    "/whatif_run": True, "/whatif_replay": True, "/whatif_export": True,  # the visitor's session store
    "/fetch_published": False,  # would write into the owner's results/published
}


CLIENT_SHARE, IDLE_S = 4, 6


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        type(self).hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_POST = do_GET  # noqa: N815

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def counting_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], _Counter.hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def ray_head():
    """A TCP listener standing where the owner's Ray head would be: it counts every connection made to it."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[tuple] = []

    def accept() -> None:
        while True:
            try:
                conn, peer = listener.accept()
            except OSError:
                return
            accepted.append(peer)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()


def data_files(results: Path) -> list[str]:
    """The names under the data folders, but DuckDB's write-ahead log: the app's own store keeps it while it
    writes and folds it in at a checkpoint, whoever calls (once in CI it went between two listings)."""
    return sorted(p.name for p in results.rglob("*") if not p.name.endswith(".duckdb.wal"))


@pytest.fixture(scope="module")
def engines_lab(tmp_path_factory, ray_head):
    """A public lab with model engines allowed; the owner's `reference` engine; localhost listed; the
    owner's LAB_RAY_ADDRESS set (at a listener that counts connections)."""
    root = tmp_path_factory.mktemp("hostile-lab")
    results = make_results_dir(root)
    write_stored_run(results / "runs" / "mine.json", "mine")
    for i in range(6):
        write_stored_run(results / "runs" / f"held{i}.json", f"held{i}")
    env = lab_env(LAB_PUBLIC="1", LAB_ALLOW_ENGINES="1", LAB_ENGINE_HOSTS="localhost", LAB_RESULTS=str(results),
                  HF_HUB_OFFLINE="1", LAB_CLIENT_MAX_ENGINES=str(CLIENT_SHARE), LAB_VISITOR_IDLE_S=str(IDLE_S),
                  LAB_VISITOR_SWEEP_S="0.5", LAB_RAY_ADDRESS=ray_head[0])
    args = ["--results", str(results), "--replay", str(EXCERPT), "--engine", "reference"]
    with app_process(args, root / "app.log", env) as (url, proc):
        yield url, results, root
    log = (root / "app.log").read_text(errors="replace")
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]
    assert "RecursionError" not in log and "TypeError" not in log, log[-3000:]


def call(client, *args, api_name: str):
    """(result, the gr.Info/Warning lines the handler showed)."""
    job = client.submit(*args, api_name=api_name)
    result = job.result(timeout=120)
    lines, updates = [], job.communicator.updates
    while not updates.empty():
        log = getattr(updates.get_nowait(), "log", None)
        if log:
            lines.append(log[0])
    return result, lines


def test_engine_options_cannot_become_server_flags(engines_lab, counting_server):
    url, results, root = engines_lab
    port, hits = counting_server
    guest = visitor(url)
    hostile = [
        "transformers-serve:Org/Model?trust-remote-code=true",
        "transformers-serve:Org/Model?-trust_remote_code=true",
        "transformers-serve:Org/Model?--TRUST_REMOTE_CODE",
        "transformers-serve:Org/Model?host=0.0.0.0",
        "vllm:Org/Model?middleware=evil.mod",
        "vllm:Org/Model?chat-template=/etc/passwd",
        "vllm:Org/Model?tool_parser_plugin=/tmp/x.py",
        "vllm:Org/Model?api_key=abc",
        "vllm:Org/Model?kv_cache_gb=100000",
        "transformers:Org/Model?temperature=1e999",
        "transformers:Org/Model?concurrency=100000",
        "transformers:Org/Model?seed=" + "9" * 5000,
        "transformers:Org/Model?lora=/etc",
        f"openai:http://localhost:{port}/v1,http://127.0.0.1:{port}/v1#m?check=false",
        f"openai:http://localhost:{port}/v1#m?check=false reference stored:/etc/passwd",
    ]
    for spec in hostile:
        table, lines = call(guest, spec, api_name="/add_engine")
        assert engine_names(table[0]) == ["reference"], spec
        assert any(line.startswith("Cannot add") for line in lines), (spec, lines)
        assert all("\n" not in line and "Traceback" not in line for line in lines)
    for line in call(guest, "transformers-serve:Org/Model?Trust-Remote-Code=1", api_name="/add_engine")[1]:
        assert "trust_remote_code" in line and "not open to visitors" in line
    assert hits == []  # no request reached the loopback server


def test_model_paths_outside_the_data_folders_answer_alike(engines_lab):
    url, _, _ = engines_lab
    guest = visitor(url)
    answers = [call(guest, f"transformers:{path}", api_name="/add_engine")[1]
               for path in ("/etc/passwd", "/no/such/passwd", "/usr/../etc/passwd")]
    answers += [call(guest, f"transformers:Org/Model?lora={path}", api_name="/add_engine")[1]
                for path in ("/etc/passwd", "/nothing/passwd")]
    assert answers[0] == answers[1] == answers[2]
    assert answers[3] == answers[4]
    assert "outside the data folders" in answers[0][0] and "/etc" not in answers[0][0]


def test_visitor_cannot_restart_the_owners_engine(engines_lab):
    url, _, _ = engines_lab
    table, lines = call(visitor(url), "reference", api_name="/restart_engine")
    assert any("visitors cannot restart" in line for line in lines), lines
    assert engine_names(table[0]) == ["reference"]


def test_every_endpoint_is_classified(engines_lab):
    url, results, _ = engines_lab
    guest = visitor(url)
    api = guest.view_api(return_format="dict", print_info=False)
    listed = set(api["named_endpoints"]) | set(api.get("unnamed_endpoints") or {})
    assert listed == set(VISITOR_MAY_CALL)
    before = data_files(results)
    assert "saved" not in str(call(guest, ["reference"], [], [], [], False, "x", api_name="/run_batch")[0])
    _, lines = call(guest, ["all published runs"], api_name="/fetch_published")
    assert any("does not let visitors" in line for line in lines), lines
    assert data_files(results) == before


def test_visitor_cannot_submit_a_cluster_sweep(engines_lab, ray_head):
    """/run_sweep and /run_race refuse a visitor in the handler, before any SPEC, pattern or path is read and
    before anything connects to the owner's cluster; the page does not show the cluster's controls or address."""
    url, results, _ = engines_lab
    address, accepted = ray_head
    guest = visitor(url)
    before = data_files(results)
    attempts = [
        (["reference"], "", 1, 1),
        ([], "stored:/etc/*", 1, 1),  # a glob outside the data folders
        ([], "@/etc/passwd", 1, 1),  # a SPEC file
        ([], "transformers-serve:Org/Model?trust_remote_code=true\nvllm:Org/M{1..100000}", 1, 1),
        (["reference"], "", 64, 1),  # the most shards the box allows
    ]
    for names, specs, shards, samples in attempts:
        html, lines = call(guest, names, specs, [], [], [], shards, samples, True, True, "x", api_name="/run_sweep")
        assert any(line.startswith("Cluster sweeps are off on this public deployment") for line in lines), lines
        assert "saved" not in html and address not in html and "/etc" not in html
    for names, specs, _, samples in attempts:  # the race beside it: refused the same way
        html, lines = call(guest, names, specs, [], [], [], samples, True, True, 1000, 10**9, api_name="/run_race")
        assert any(line.startswith("Cluster sweeps are off on this public deployment") for line in lines), lines
        assert "finalist" not in html and address not in html and "/etc" not in html
    assert accepted == []  # nothing connected to the owner's Ray head
    assert data_files(results) == before
    config = httpx.get(f"{url}config", timeout=30).json()
    assert address not in json.dumps(config)
    panel = next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == "lab-sweep")
    assert panel["props"].get("visible") is False


def test_visitor_cannot_download_or_replace_the_replay(engines_lab):
    """The replay download handler is private (no api_name) but reachable by fn_index."""
    url, _, _ = engines_lab
    guest = visitor(url)
    config = httpx.get(f"{url}config", timeout=30).json()
    button = next(c["id"] for c in config["components"] if (c.get("props") or {}).get("elem_id") == "lab-download-replay")
    download = [i for i, d in enumerate(config["dependencies"]) if [button, "click"] in d.get("targets", [])]
    assert download, "the download button's event"
    messages = private_call(url, download[0], [], button, "hostile-download")
    logs = [m.get("log", "") for m in messages if m.get("msg") == "log"]
    assert any("does not let visitors" in text for text in logs), messages


def private_call(url: str, fn_index: int, data: list, trigger: int, session: str,
                 event_data: dict | None = None) -> list[dict]:
    """Call an event that has no API name as a browser does (gradio_client refuses those):
    queue/join, then read the session's event stream until the event completes."""
    joined = httpx.post(f"{url}gradio_api/queue/join", json={"data": data, "fn_index": fn_index, "trigger_id": trigger,
                                                            "session_hash": session, "event_data": event_data},
                        timeout=30)
    assert joined.status_code == 200, joined.text
    messages = []
    with httpx.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}, timeout=60) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                messages.append(json.loads(line[5:]))
                if messages[-1].get("msg") == "process_completed":
                    break
    return messages


def test_samples_stay_in_the_visitors_session(engines_lab):
    """Visitor A samples on the owner's engine; visitor B's Samples panel (every way it is filled:
    the page load and the step picker's change event) never shows A's samples."""
    url, _, _ = engines_lab
    a = visitor(url)
    key = a.predict(None, False, None, api_name="/show_step")[1]["value"]
    mine = a.predict(key, 2, "", "", 0, api_name="/sample_step")
    assert "reference" in mine and "lab-sample" in mine
    config = httpx.get(f"{url}config", timeout=30).json()
    panel = next(c["id"] for c in config["components"] if (c.get("props") or {}).get("elem_id") == "lab-samples")
    fills = [(i, d) for i, d in enumerate(config["dependencies"]) if d.get("outputs") == [panel]
             and d.get("api_name") != "sample_step"]
    assert fills, "the events that fill the Samples panel"
    for i, dep in fills:
        trigger = (dep.get("targets") or [[None]])[0][0]
        data = [key] if dep.get("inputs") else []
        done = private_call(url, i, data, trigger, f"visitor-b-{i}")[-1]
        shown = json.dumps(done.get("output", {}).get("data"))
        assert done.get("success") and "reference" not in shown, shown[:500]


def test_one_client_holds_its_share_and_idle_engines_go(engines_lab):
    url, results, _ = engines_lab
    first, second = visitor(url), visitor(url)  # two sessions of one client (127.0.0.1)
    held = []
    for guest, files in ((first, range(0, 3)), (second, range(3, 6))):
        for i in files:
            table = call(guest, f"stored:{results / 'runs' / f'held{i}.json'}", api_name="/add_engine")[0]
        held.append([n for n in engine_names(table[0]) if n != "reference"])
    assert len(held[0]) == 3 and len(held[0]) + len(held[1]) == CLIENT_SHARE, held
    _, lines = call(second, f"stored:{results / 'runs' / 'held5.json'}", api_name="/add_engine")
    assert any("at most" in line and "client" in line for line in lines), lines
    time.sleep(IDLE_S + 2)  # no request from either session: their engines are unloaded
    for guest in (first, second):
        table = call(guest, "", api_name="/add_engine")[0]
        assert engine_names(table[0]) == ["reference"]


@pytest.mark.parametrize("size", [0, 1, 2])
def test_upload_route_refuses_tiny_files(engines_lab, size):
    url, _, _ = engines_lab
    answer = httpx.post(f"{url}gradio_api/upload", files={"files": ("t.txt", b"x" * size)}, timeout=60)
    assert answer.status_code == 413


def test_malformed_handler_arguments_get_one_line(engines_lab):
    from gradio_client.exceptions import AppError

    url, _, _ = engines_lab
    guest = visitor(url)
    for request in ("[[1],[2]]", "[" * 50_000, '{"a": 1}', "[1, 2]"):
        assert call(guest, request, api_name="/prompt_audit")[0] == ""
    for key in (["a"], {"a": 1}, 7):
        with pytest.raises(AppError) as err:
            guest.predict(key, False, None, api_name="/show_step")
        assert "step key" in str(err.value) and "\n" not in str(err.value).strip()


def test_the_owners_start_specs_keep_full_pass_through(tmp_path):
    """The owner's --engine SPECs (no visitor session) are not held to the visitor allow-list:
    unknown options still become server flags, spelled as the normalised name."""
    from pathlib import Path

    from lab.engines.admission import Admission
    from lab.engines.registry import create_engine, resolve_spec
    from lab.errors import EngineSpecError

    spec = "transformers-serve:Org/Model?--Max-Num-Seqs=4&chat-template=t.jinja"
    admission = Admission(public=True, allow_models=True, data_roots=[Path(tmp_path)])
    admission.check(resolve_spec(spec))  # the owner: allowed
    with pytest.raises(EngineSpecError, match="not open to visitors"):
        admission.check(resolve_spec(spec), visitor=True)
    assert create_engine(spec).extra == {"max_num_seqs": "4", "chat_template": "t.jinja"}
    for spelling in ("trust-remote-code=true", "-trust_remote_code=1", "TRUST_REMOTE_CODE"):
        with pytest.raises(EngineSpecError, match="trust_remote_code is never a SPEC option"):
            create_engine(f"transformers-serve:Org/Model?{spelling}")
