"""Each preset's architecture through the lab's `vllm:` engine against vLLM's own offline engine.

Per architecture (a tiny random-weight checkpoint in the preset's real layout, built as the tests build
it: tests/engines/helpers_presets.py), with the preset's settings (`?preset=KEY`) on both sides:

  start      to the first answer, from the process's launch on both sides (the interpreter's start-up and
             vLLM's import included): the lab's engine.load() (its `vllm serve` started to ready, ending
             with a one-token probe request), and of that the server's process started to its /health
             answering; vLLM: its process launched to its first answer (and of that to `LLM(...)`
             constructed), the same one-token request with the same top-K log-probabilities. vLLM's
             first request with log-probabilities pays a lazy set-up on both sides (1.5 s on this CPU;
             10 ms on the next). `--start-rounds` starts of both in turn (lab first, then vLLM first, …;
             the earlier round's engines closed first), medians and the range of the ratio
  TTFT       the median over the steps of the seconds to the first token, each step alone: the lab's
             streamed `ttft_s` at concurrency 1; vLLM: `LLM.generate([prompt], max_tokens=1)`
  tokens/s   generated tokens over the seconds of the whole run, each step alone, `--max-tokens` each
             (`ignore_eos`): the lab's replay (render, stream, parse, score, checkpoint, file) against a
             loop of `LLM.generate([prompt])`
  direct     the lab's own requests (the same fields, the prompt as the same token ids) streamed to the
             lab's `vllm serve` by plain httpx, one at a time, read to the end (TTFT: to the first line
             carrying text): vLLM's HTTP API server without the lab, which splits the lab's ratios into
             the API server's share and the lab's own

vLLM's engine gets exactly the lab server's engine arguments (read from its `vllm serve` command line:
dtype, context, language-model-only, KV-cache bytes, eager mode, prefix caching off) and the same top-K
log-probabilities with every token (the lab's `logprobs`, default 5). The last start round's engines
stay: TTFT and tokens/s are measured in `--rounds` rounds, each running the lab,
direct and vLLM in turn, so that all three meet this machine in the same state (on 2 shared cores one
pass of each moved the ratios by up to 0.1 between runs). Prints a table with the medians over the
rounds and the ratios lab / vLLM (goal ≤ 1.10) with their range, and each lab server's resident memory
(KV cache 1 GiB). Needs $LAB_VLLM (bash scripts/vllm_cpu_env.sh). Usage:

    LAB_VLLM=$(bash scripts/vllm_cpu_env.sh) python bench/bench_presets_vllm.py [--archs qwen35,lfm2moe,gemma4]
        [--steps 6] [--max-tokens 32] [--rounds 3] [--start-rounds 1] [--json FILE]

`--json FILE` also writes every start round's and round's figures, per architecture, for a look at the spread
behind the medians. `--stream-cost N` then also runs bench/vllm_stream_cost.py on each architecture's prompts and
engine arguments (N rounds, after the lab's server and vLLM's engine have stopped): vLLM's own AsyncLLM, the
engine behind `vllm serve`, streaming each answer against `LLM.generate`, in one process taking turns. That is
what streaming costs vLLM itself, without HTTP and without the lab: the floor of any front end that streams.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import Record, vllm_version  # noqa: E402
from bench.vllm_args import engine_arguments  # noqa: E402
from bench.vllm_cpu_setup import OfflineRounds, offline_command, vllm_exe  # noqa: E402
from lab.data.replay import load_replay  # noqa: E402
from lab.engines import create_engine  # noqa: E402
from lab.engines.base import Sampling  # noqa: E402
from lab.engines.client.fields import request_fields  # noqa: E402
from lab.engines.context import prompt_fits  # noqa: E402
from lab.prompts.engine_prompt import render_for_engine  # noqa: E402
from lab.runs.replay import ReplayConfig, replay  # noqa: E402
from tests.engines import helpers_presets  # noqa: E402
from tests.helpers_servers import server_memory_gib  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

CONTEXT = 8192
# vLLM's CPU worker keeps spinning for 1 s after its last step (shm_broadcast's SpinCondition, busy_loop_s=1),
# on core 0, where both sides' workers are bound: each side waits that long after the other's last step
SETTLE_S = 2.0
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


def direct_side(engine, prompts: list, max_tokens: int) -> dict:
    """The prompts (as the lab sends them: token ids) streamed one at a time to the engine's server by
    plain httpx, with the fields the lab sends (lab.engines.client.fields: sampling, top-K
    log-probabilities, token ids, usage; `ignore_eos`), each read to its end: tokens/s, and the median
    seconds to the first line that carries text."""
    fields, _ = request_fields(Sampling(temperature=0, max_tokens=max_tokens), {}, logprobs=engine.logprobs_k)
    body = {"model": engine.served_model(), "stream": True, **fields, "ignore_eos": True}  # the lab's own request
    url = f"{engine.server.base_url}/v1/completions"
    firsts = []
    with httpx.Client(timeout=600) as client:
        with client.stream("POST", url, json={**body, "prompt": prompts[0], "max_tokens": 2}) as warm:
            warm.read()
        began = time.perf_counter()
        for prompt in prompts:
            sent, first = time.perf_counter(), None
            with client.stream("POST", url, json={**body, "prompt": prompt}) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if first is None and '"text"' in line:
                        first = time.perf_counter() - sent
            firsts.append(first)
    return {"tokens_per_s": len(prompts) * max_tokens / (time.perf_counter() - began), "ttft_s": statistics.median(firsts)}


def lab_start(spec: str):
    """A lab engine started: the engine, and its seconds from the call to load() to its first answer (the
    probe) and of those its server's process started to /health answering."""
    engine = create_engine(spec)
    began = time.perf_counter()
    engine.load()
    return engine, {"first_answer_s": time.perf_counter() - began, "ready_s": engine.server.ready_after_s or 0.0}


def one_architecture(arch: str, args: argparse.Namespace, exe: str, tmp: Path) -> dict:
    builder, preset, dtype = ARCHS[arch]
    folder = getattr(helpers_presets, builder)(tmp / arch / "checkpoint", positions=CONTEXT)
    spec = (f"vllm:{folder}?preset={preset}&dtype={dtype}&max_model_len={CONTEXT}&enforce_eager=true"
            f"&enable_prefix_caching=false&max_tokens={args.max_tokens}&ignore_eos=true&kv_cache_gb=1&concurrency=1"
            f"&ready_timeout=1200&name=bench-{arch}")
    engine = offline = None
    starts = []  # per start round: the lab's and vLLM's start
    try:
        # the starts, `--start-rounds` times, in turns (lab first, then vLLM first, …); the last round's
        # engines stay for the rounds below. vLLM's engine gets the lab server's own engine arguments and
        # the same top-K log-probabilities
        for number in range(args.start_rounds):
            if engine is not None:  # the earlier round's engines go first (a round's second start meets the first's, idle)
                offline.close()
                engine.close()
            offline = None
            if number % 2:
                offline = OfflineRounds(exe, offline_args, tmp / arch / "offline.log", f"{arch} generate")
            engine, lab = lab_start(spec)
            if number == 0:
                fitting = ((s, render_for_engine(engine, s)) for s in load_replay(args.replay).steps)
                chosen = [(s, r) for s, r in fitting if prompt_fits(r.n_tokens or CONTEXT, args.max_tokens, CONTEXT)][:args.steps]
                steps, rendered = [s for s, _ in chosen], [r for _, r in chosen]
                prompts = [r.text for r in rendered]
                sent = [list(r.token_ids) if engine.client.prompt_as_ids and r.token_ids is not None else r.text
                        for r in rendered]  # what the lab's client sends
                (tmp / arch / "prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
                offline_args = ["--model", str(folder), "--prompts", str(tmp / arch / "prompts.json"),
                                "--max-tokens", str(args.max_tokens), "--engine-json",
                                json.dumps(engine_arguments(engine.server_argv(0))), "--logprobs", str(engine.logprobs_k)]
            if offline is None:
                offline = OfflineRounds(exe, offline_args, tmp / arch / "offline.log", f"{arch} generate")
            starts.append({"lab": lab, "vllm": {"first_answer_s": offline.start["first_answer_from_launch_s"],
                                                "ready_s": offline.start["ready_from_launch_s"]}})
        rounds = []
        for number in range(args.rounds):
            time.sleep(SETTLE_S)
            lab = lab_side(engine, steps, args.max_tokens, tmp / arch / f"round{number}")
            direct = direct_side(engine, sent, args.max_tokens)
            time.sleep(SETTLE_S)
            vllm = offline.round()
            assert vllm["tokens"] == len(prompts) * args.max_tokens
            rounds.append({"lab": lab, "direct": direct, "vllm_ttft_s": statistics.median(vllm["ttft_s"]),
                           "vllm_tokens_per_s": vllm["tokens"] / sum(vllm["step_s"])})
        memory = server_memory_gib(engine)
    finally:
        if offline is not None:
            offline.close()
        if engine is not None:
            engine.close()
    # the same model, prompts, engine arguments and log-probabilities as vLLM's offline side
    stream_cost = streaming_floor(exe, [*offline_args, "--rounds", str(args.stream_cost)], tmp / arch) if args.stream_cost else None
    return {"arch": arch, "preset": preset, "dtype": dtype, "steps": len(steps), "memory_gib": memory,
            "starts": starts, "rounds": rounds, "stream_cost": stream_cost}


def streaming_floor(exe: str, args: list[str], folder: Path) -> dict:
    """bench/vllm_stream_cost.py run in vLLM's environment: AsyncLLM streamed / LLM.generate (its summary)."""
    out = folder / "stream_cost.json"
    command, env = offline_command(exe, [*args, "--out", str(out)], script="vllm_stream_cost.py")
    with open(folder / "stream_cost.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0 or not out.is_file():
        sys.exit(f"bench/vllm_stream_cost.py failed (exit {done.returncode}); see {folder / 'stream_cost.log'}")
    return json.loads(out.read_text(encoding="utf-8"))


def spread(values: list[float]) -> str:
    """The median of `values`, with their range when there are several."""
    middle = statistics.median(values)
    return f"{middle:.2f}" if len(values) == 1 else f"{middle:.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", default=",".join(ARCHS), help=f"comma-separated, of {', '.join(ARCHS)}")
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three sides in turn (medians reported)")
    parser.add_argument("--start-rounds", type=int, default=1, help="starts of both sides in turn (medians reported)")
    parser.add_argument("--json", help="also write every round's figures (starts and rounds, per architecture) to this file")
    parser.add_argument("--stream-cost", type=int, default=0, metavar="N",
                        help="also N rounds of vLLM's AsyncLLM streamed against LLM.generate (bench/vllm_stream_cost.py)")
    args = parser.parse_args()
    if min(args.rounds, args.start_rounds, args.steps) < 1 or args.stream_cost < 0:
        sys.exit("--rounds, --start-rounds and --steps: give at least 1; --stream-cost: 0 (off) or more rounds")
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown:
        sys.exit(f"--archs: unknown {', '.join(unknown)} (known: {', '.join(ARCHS)})")
    exe = vllm_exe("bench_presets_vllm")
    record = Record("bench_presets_vllm", extra_versions={"vllm": vllm_version(exe)})
    record.setting(archs=archs, steps=args.steps, max_tokens=args.max_tokens, rounds=args.rounds,
                   start_rounds=args.start_rounds, stream_cost_rounds=args.stream_cost)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-presets-") as tmp:
        for arch in archs:
            print(f"{arch}: building its checkpoint and starting vllm serve …", flush=True)
            results.append(one_architecture(arch, args, exe, Path(tmp)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"\n{args.max_tokens} tokens a step, each step alone, prefix caching off; {args.start_rounds} start rounds "
          f"(lab first, then vLLM first, …), {args.rounds} rounds, the sides in turn (lab, direct, vLLM) each round; "
          "medians over the rounds (range)\n")
    print("| architecture (preset, dtype) | steps | start lab (server ready) / vLLM (engine ready) s | TTFT lab / direct / vLLM ms "
          "| tokens/s lab / direct / vLLM | ratio start | ratio TTFT lab | ratio TTFT direct | ratio time/token lab "
          "| ratio time/token direct | server resident GiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        starts, rounds = r["starts"], r["rounds"]

        def median(pick, over=rounds) -> float:
            return statistics.median(pick(x) for x in over)

        def started(side: str, what: str) -> float:
            return median(lambda x: x[side][what], starts)

        print(f"| {r['arch']} ({r['preset']}, {r['dtype']}) | {r['steps']} | {started('lab', 'first_answer_s'):.1f} "
              f"({started('lab', 'ready_s'):.1f}) / {started('vllm', 'first_answer_s'):.1f} ({started('vllm', 'ready_s'):.1f}) | "
              f"{median(lambda x: x['lab']['ttft_s']) * 1000:.0f} / {median(lambda x: x['direct']['ttft_s']) * 1000:.0f} / "
              f"{median(lambda x: x['vllm_ttft_s']) * 1000:.0f} | {median(lambda x: x['lab']['tokens_per_s']):.1f} / "
              f"{median(lambda x: x['direct']['tokens_per_s']):.1f} / {median(lambda x: x['vllm_tokens_per_s']):.1f} "
              f"| {spread([x['lab']['first_answer_s'] / x['vllm']['first_answer_s'] for x in starts])} "
              f"| {spread([x['lab']['ttft_s'] / x['vllm_ttft_s'] for x in rounds])} "
              f"| {spread([x['direct']['ttft_s'] / x['vllm_ttft_s'] for x in rounds])} "
              f"| {spread([x['vllm_tokens_per_s'] / x['lab']['tokens_per_s'] for x in rounds])} "
              f"| {spread([x['vllm_tokens_per_s'] / x['direct']['tokens_per_s'] for x in rounds])} | {r['memory_gib']:.2f} |")
        name = f"{r['arch']} ({r['preset']}, {r['dtype']})"
        record.figure(f"{name}: start to the first answer, lab / vLLM offline",
                      statistics.median(x['lab']['first_answer_s'] / x['vllm']['first_answer_s'] for x in starts), "x",
                      note=f"median of {len(starts)} start rounds")
        record.figure(f"{name}: TTFT, lab / vLLM offline",
                      statistics.median(x['lab']['ttft_s'] / x['vllm_ttft_s'] for x in rounds), "x",
                      note=f"median of {len(rounds)} rounds")
        record.figure(f"{name}: TTFT, plain httpx to the lab's server / vLLM offline",
                      statistics.median(x['direct']['ttft_s'] / x['vllm_ttft_s'] for x in rounds), "x")
        record.figure(f"{name}: time per generated token, lab / vLLM offline",
                      statistics.median(x['vllm_tokens_per_s'] / x['lab']['tokens_per_s'] for x in rounds), "x")
        record.figure(f"{name}: time per generated token, plain httpx / vLLM offline",
                      statistics.median(x['vllm_tokens_per_s'] / x['direct']['tokens_per_s'] for x in rounds), "x")
        record.figure(f"{name}: the server's resident memory", r["memory_gib"], "GiB")
    floors = [r for r in results if r["stream_cost"]]
    if floors:
        print("\nvLLM's own streaming, without HTTP and without the lab: its AsyncLLM streamed / LLM.generate, the same "
              "prompts and engine arguments, in one process taking turns (bench/vllm_stream_cost.py); medians (range)\n")
        print("| architecture | rounds | ratio TTFT | ratio time/token |")
        print("| --- | --- | --- | --- |")
        for r in floors:
            cost = r["stream_cost"]["rounds"]
            print(f"| {r['arch']} | {len(cost)} | {spread([x['async_ttft_s'] / x['generate_ttft_s'] for x in cost])} "
                  f"| {spread([x['async_s'] / x['generate_s'] for x in cost])} |")
            record.figure(f"{r['arch']}: vLLM's AsyncLLM streamed / LLM.generate, TTFT",
                          statistics.median(x['async_ttft_s'] / x['generate_ttft_s'] for x in cost), "x",
                          note=f"median of {len(cost)} rounds, no HTTP, no lab")
            record.figure(f"{r['arch']}: vLLM's AsyncLLM streamed / LLM.generate, time per token",
                          statistics.median(x['async_s'] / x['generate_s'] for x in cost), "x",
                          note=f"median of {len(cost)} rounds, no HTTP, no lab")
    record.write()

if __name__ == "__main__":
    main()
