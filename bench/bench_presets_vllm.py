"""Each preset's architecture through the lab's `vllm:` engine against vLLM's own offline engine (issue 24).

Per architecture (a tiny random-weight checkpoint in the preset's real layout, built as the tests build
it: tests/engines/helpers_presets.py), with the preset's settings (`?preset=KEY`) on both sides:

  start      to the first answer, vLLM's import included on both sides: the lab's `vllm serve` started to
             ready (engine.load(), which ends with a one-token probe request), and of that the server's
             process started to its /health answering; vLLM: its process started to `LLM(...)` constructed
             and its first answer, the same one-token request with the same top-K log-probabilities. vLLM's
             first request with log-probabilities pays a lazy set-up on both sides (1.5 s on this CPU; 10 ms
             on the next)
  TTFT       the median over the steps of the seconds to the first token, each step alone: the lab's
             streamed `ttft_s` at concurrency 1; vLLM: `LLM.generate([prompt], max_tokens=1)`
  tokens/s   generated tokens over the seconds of the whole run, each step alone, `--max-tokens` each
             (`ignore_eos`): the lab's replay (render, stream, parse, score, checkpoint, file) against a
             loop of `LLM.generate([prompt])`
  direct     the same prompts and request fields streamed to the lab's own `vllm serve` by plain httpx,
             one at a time, read to the end: vLLM's HTTP API server without the lab, which splits the
             lab's ratio into the API server's share and the lab's own

vLLM's engine gets exactly the lab server's engine arguments (read from its `vllm serve` command line:
dtype, context, language-model-only, KV-cache bytes, eager mode, prefix caching off) and the same top-K
log-probabilities with every token (the lab's `logprobs`, default 5). Prints a table
and the ratios lab / vLLM (goal ≤ 1.10), with each lab server's resident memory (KV cache 1 GiB). Needs $LAB_VLLM (bash scripts/vllm_cpu_env.sh). Usage:

    LAB_VLLM=$(bash scripts/vllm_cpu_env.sh) python bench/bench_presets_vllm.py [--archs qwen35,lfm2moe,gemma4]
        [--steps 6] [--max-tokens 32]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.vllm_args import engine_arguments  # noqa: E402
from bench.vllm_cpu_setup import run_offline, vllm_exe  # noqa: E402
from lab.data.replay import load_replay  # noqa: E402
from lab.engines import create_engine  # noqa: E402
from lab.engines.base import Sampling  # noqa: E402
from lab.engines.client.fields import request_fields  # noqa: E402
from lab.runs.pipeline import render_for_engine  # noqa: E402
from lab.runs.replay import ReplayConfig, replay  # noqa: E402
from tests.engines import helpers_presets  # noqa: E402
from tests.helpers_servers import server_memory_gib  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

CONTEXT = 8192
# architecture -> (checkpoint builder in tests/engines/helpers_presets.py, preset, dtype vLLM's CPU backend runs it in)
ARCHS = {
    "qwen35": ("save_qwen35", "qwen35-2b-sft", "bfloat16"),
    "lfm2moe": ("save_lfm2moe", "lfm25-8b-a1b-sft", "float32"),
    "gemma4": ("save_gemma4", "gemma4-e4b-sft", "float32"),
}
def lab_side(engine, steps: list, max_tokens: int, out: Path) -> dict:
    """The lab's replay of `steps` one at a time (the engine's concurrency is 1): start, TTFT, tokens/s."""
    replay(engine, steps[:1], ReplayConfig(out_dir=out / "warm", sampling=Sampling(temperature=0, max_tokens=2)))
    began = time.perf_counter()
    path = replay(engine, steps, ReplayConfig(out_dir=out / "run", sampling=Sampling(temperature=0, max_tokens=max_tokens)))
    wall = time.perf_counter() - began
    rows = json.loads(path.read_text())["per_step"]
    assert all(r["error"] is None for r in rows), [r["error"] for r in rows if r["error"]]
    tokens = sum(int(r["completion_tokens"]) for r in rows)
    assert tokens == len(steps) * max_tokens, "a step did not generate --max-tokens tokens"
    return {"ttft_s": statistics.median(float(r["ttft_s"]) for r in rows), "tokens_per_s": tokens / wall}


def direct_side(engine, prompts: list[str], max_tokens: int) -> float:
    """Tokens/s of the prompts streamed one at a time to the engine's server by plain httpx, with the fields
    the lab sends (lab.engines.client.fields: sampling, top-K log-probabilities, token ids, usage; `ignore_eos`),
    each read to its end."""
    fields, _ = request_fields(Sampling(temperature=0, max_tokens=max_tokens), {}, logprobs=engine.logprobs_k)
    body = {"model": engine.served_model(), "stream": True, **fields, "ignore_eos": True}  # the lab's own request
    url = f"{engine.server.base_url}/v1/completions"
    with httpx.Client(timeout=600) as client:
        with client.stream("POST", url, json={**body, "prompt": prompts[0], "max_tokens": 2}) as warm:
            warm.read()
        began = time.perf_counter()
        for prompt in prompts:
            with client.stream("POST", url, json={**body, "prompt": prompt}) as response:
                response.raise_for_status()
                for _ in response.iter_lines():
                    pass
    return len(prompts) * max_tokens / (time.perf_counter() - began)


def one_architecture(arch: str, args: argparse.Namespace, exe: str, tmp: Path) -> dict:
    builder, preset, dtype = ARCHS[arch]
    folder = getattr(helpers_presets, builder)(tmp / arch / "checkpoint", positions=CONTEXT)
    spec = (f"vllm:{folder}?preset={preset}&dtype={dtype}&max_model_len={CONTEXT}&enforce_eager=true"
            f"&enable_prefix_caching=false&max_tokens={args.max_tokens}&ignore_eos=true&kv_cache_gb=1&concurrency=1"
            f"&ready_timeout=1200&name=bench-{arch}")
    engine = create_engine(spec)
    began = time.perf_counter()
    engine.load()
    start_s = time.perf_counter() - began
    server_ready_s = engine.server.ready_after_s or 0.0  # of which: its process started to /health answering
    try:
        steps = [s for s in load_replay(args.replay).steps
                 if (render_for_engine(engine, s).n_tokens or CONTEXT) + args.max_tokens <= CONTEXT][:args.steps]
        prompts = [render_for_engine(engine, s).text for s in steps]
        llm_args = engine_arguments(engine.server_argv(0))
        logprobs = engine.logprobs_k  # the top-K log-probabilities the lab asks for with every token: vLLM too
        lab = lab_side(engine, steps, args.max_tokens, tmp / arch)
        direct = direct_side(engine, prompts, args.max_tokens)
        memory = server_memory_gib(engine)
    finally:
        engine.close()
    (tmp / arch / "prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
    offline = run_offline(exe, ["--model", str(folder), "--prompts", str(tmp / arch / "prompts.json"), "--max-tokens",
                                str(args.max_tokens), "--one-at-a-time", "--engine-json", json.dumps(llm_args),
                                "--logprobs", str(logprobs)],
                          tmp / arch / "offline.json", f"{arch} generate")
    assert offline["tokens"] == len(prompts) * args.max_tokens
    return {"arch": arch, "preset": preset, "dtype": dtype, "steps": len(steps), "memory_gib": memory,
            "start": (start_s, offline["first_answer_s"]), "server_ready_s": server_ready_s,
            "ttft": (lab["ttft_s"], statistics.median(offline["ttft_s"])),
            "tokens_per_s": (lab["tokens_per_s"], offline["tokens"] / sum(offline["step_s"])), "direct": direct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default=",".join(ARCHS), help=f"comma-separated, of {', '.join(ARCHS)}")
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown:
        sys.exit(f"--archs: unknown {', '.join(unknown)} (known: {', '.join(ARCHS)})")
    exe = vllm_exe("bench_presets_vllm")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-presets-") as tmp:
        for arch in archs:
            print(f"{arch}: building its checkpoint and starting vllm serve …", flush=True)
            results.append(one_architecture(arch, args, exe, Path(tmp)))
    print(f"\n{args.max_tokens} tokens a step, each step alone, prefix caching off\n")
    print("| architecture (preset, dtype) | steps | start lab (server ready) / vLLM s | TTFT lab / vLLM ms | tokens/s lab / direct / vLLM "
          "| ratio start | ratio TTFT | ratio time/token lab / direct | server resident GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        (ls, vs), (lt, vt), (lr, vr) = r["start"], r["ttft"], r["tokens_per_s"]
        print(f"| {r['arch']} ({r['preset']}, {r['dtype']}) | {r['steps']} | {ls:.1f} ({r['server_ready_s']:.1f}) / {vs:.1f} | "
              f"{lt * 1000:.0f} / {vt * 1000:.0f} | {lr:.1f} / {r['direct']:.1f} / {vr:.1f} | {ls / vs:.2f} | {lt / vt:.2f} "
              f"| {vr / lr:.2f} / {vr / r['direct']:.2f} | {r['memory_gib']:.2f} |")


if __name__ == "__main__":
    main()
