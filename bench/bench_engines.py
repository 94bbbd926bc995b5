"""The openai client's per-request overhead against a direct HTTP call to the same server.

Builds a tiny random-weight model (as the tests do), starts a real `transformers serve` of it on
127.0.0.1, and times the same streamed `/v1/completions` requests (same body, small max_tokens)
two ways, alternating so that the server's drift hits both alike:

  direct  one httpx POST per request, reading the SSE stream to its end;
  lab     `engine.generate([request])` of the `openai:` engine (SDK, stream parsing, TTFT,
          retry bookkeeping, replica choice, thread pool), one request at a time.

It prints the medians, their ratio and difference per request, and the engine's own TTFT and
latency figures. With a CUDA GPU it repeats this against `transformers serve --device cuda`, and
against `vllm serve` of the same model when `$LAB_VLLM` (or `vllm` on PATH) exists; without a
GPU those sections are skipped with a message. Usage:

    python bench/bench_engines.py [--requests 60] [--max-tokens 4]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench.record import Record  # noqa: E402
from lab.data.step import Step  # noqa: E402
from lab.engines import Request, Sampling, create_engine  # noqa: E402
from lab.engines.client.fields import request_fields  # noqa: E402
from tests.helpers_servers import free_port, stop_process, wait_http  # noqa: E402

STEP = Step("task-000", 0, 0, 2, False, "src/code", "code", (), "USER:\nlist files", '{"commands": []}')
TEXTS = ["list the files", "cd /app && ls", "cat README.md", "echo hello", "grep -i yaml config",
         "python main.py", "pwd", "ls -la /app/src"]


def build_tiny_model(folder: Path) -> Path:
    """The tests' tiny Qwen2 (hidden 32, 2 layers) with its trained byte-level tokenizer."""
    from tests.conftest import save_tiny_model

    return save_tiny_model(folder, hidden=32, heads=4, kv_heads=2, positions=4096)


@contextmanager
def served(cmd: list[str], port: int, log: Path, health: str = "/health", timeout: float = 600.0):
    """Start a server command in its own process group; yield its base URL; stop it."""
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base + health, timeout, proc)
        yield base
    finally:
        stop_process(proc)


def direct_request(client: httpx.Client, url: str, body: dict) -> float:
    """One streamed completion over plain httpx, read to the end; returns seconds."""
    start = time.perf_counter()
    with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        for _ in response.iter_lines():
            pass
    return time.perf_counter() - start


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def compare(base: str, model: str, tokenizer: str, n: int, max_tokens: int, label: str) -> dict:
    """Alternate direct and lab requests against one server; print and return the figures."""
    engine = create_engine(f"openai:{base}#{model}?tokenizer={tokenizer}&concurrency=1&retries=0")
    engine.load()
    sampling = Sampling(max_tokens=max_tokens)
    prompts = [engine.tokenizer.apply_chat_template([{"role": "user", "content": t}], tokenize=False,
                                                    add_generation_prompt=True) for t in TEXTS]
    refused = engine.replicas.replicas[0].refused
    url = f"{engine.base_url}/completions"
    direct, lab, ttft, latency = [], [], [], []
    with httpx.Client(timeout=120.0) as client:
        for i in range(3):  # warm-up of both paths (connections, model caches)
            prompt = prompts[i % len(prompts)]
            direct_request(client, url, {"model": model, "prompt": prompt, "stream": True,
                                         **request_fields(sampling, refused)[0]})
            engine.generate([Request(STEP, prompt)], sampling)
        for i in range(n):
            prompt = prompts[i % len(prompts)]
            body = {"model": model, "prompt": prompt, "stream": True, **request_fields(sampling, refused)[0]}
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for which in order:
                if which == 0:
                    direct.append(direct_request(client, url, body))
                else:
                    start = time.perf_counter()
                    [completion] = engine.generate([Request(STEP, prompt)], sampling)
                    lab.append(time.perf_counter() - start)
                    if completion.error:
                        raise SystemExit(f"{label}: request failed: {completion.error}")
                    ttft.append(completion.ttft_s)
                    latency.append(completion.latency_s)
    engine.close()
    d, m = statistics.median(direct), statistics.median(lab)
    dmin, mmin = min(direct), min(lab)
    figures = {"server": label, "requests": n, "max_tokens": max_tokens, "direct_ms": 1000 * d, "lab_ms": 1000 * m,
               "ratio": m / d, "overhead_ms": 1000 * (m - d), "direct_min_ms": 1000 * dmin, "lab_min_ms": 1000 * mmin,
               "ratio_min": mmin / dmin, "ttft_p50_ms": 1000 * pct(ttft, 0.5), "ttft_p95_ms": 1000 * pct(ttft, 0.95),
               "latency_p50_ms": 1000 * pct(latency, 0.5), "refused": sorted(refused)}
    print(f"[{label}] {n} requests, max_tokens {max_tokens}, one at a time (min is the least noisy figure)")
    print(f"  direct httpx  median {1000 * d:8.2f} ms, min {1000 * dmin:8.2f} ms per request")
    print(f"  lab client    median {1000 * m:8.2f} ms, min {1000 * mmin:8.2f} ms per request")
    print(f"  ratio lab/direct: median {m / d:.3f} ({1000 * (m - d):+.2f} ms), min {mmin / dmin:.3f} "
          f"({1000 * (mmin - dmin):+.2f} ms)")
    print(f"  lab-measured  TTFT p50 {figures['ttft_p50_ms']:.1f} ms, p95 {figures['ttft_p95_ms']:.1f} ms; "
          f"latency p50 {figures['latency_p50_ms']:.1f} ms; fields the server refuses: {figures['refused'] or 'none'}")
    return figures


def transformers_serve_cmd(model: Path, port: int, device: str) -> list[str]:
    exe = shutil.which("transformers") or str(Path(sys.executable).with_name("transformers"))
    return [exe, "serve", str(model), "--host", "127.0.0.1", "--port", str(port), "--device", device]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = parser.parse_args()
    record = Record("bench_engines", packages=("openai", "httpx", "transformers", "torch"))
    record.setting(requests=args.requests, max_tokens=args.max_tokens)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny")
        port = free_port()
        with served(transformers_serve_cmd(model, port, "cpu"), port, Path(tmp) / "cpu.log") as base:
            results.append(compare(base, str(model), str(model), args.requests, args.max_tokens,
                                   "transformers serve, CPU"))
        try:
            import torch

            gpu = torch.cuda.is_available()
        except ImportError:
            gpu = False
        if not gpu:
            print("[GPU] skipped: no CUDA GPU visible to torch on this machine")
        else:
            port = free_port()
            with served(transformers_serve_cmd(model, port, "cuda"), port, Path(tmp) / "gpu.log") as base:
                results.append(compare(base, str(model), str(model), args.requests, args.max_tokens,
                                       "transformers serve, GPU"))
            vllm = os.environ.get("LAB_VLLM") or shutil.which("vllm")
            if not vllm:
                print("[vLLM] skipped: no vllm executable ($LAB_VLLM or vllm on PATH)")
            else:
                port = free_port()
                cmd = [vllm, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                       "--gpu-memory-utilization", "0.2", "--max-model-len", "4096", "--enforce-eager"]
                with served(cmd, port, Path(tmp) / "vllm.log") as base:
                    results.append(compare(base, str(model), str(model), args.requests, args.max_tokens,
                                           "vllm serve, GPU"))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    for figures in results:
        server = figures["server"]
        record.figure(f"{server}: one request through the lab's client", figures["lab_ms"], "ms", note="median")
        record.figure(f"{server}: the same request by plain httpx", figures["direct_ms"], "ms", note="median")
        record.figure(f"{server}: lab / direct", figures["ratio"], "x",
                      note=f"ratio of the medians; of the minimums {figures['ratio_min']:.3f}")
        record.figure(f"{server}: TTFT as the lab measures it, p50", figures["ttft_p50_ms"], "ms")
    record.write()


if __name__ == "__main__":
    main()
