"""What streaming itself costs vLLM: its AsyncLLM (the engine `vllm serve` runs, without the HTTP server)
streaming each answer, against `LLM.generate` on the same prompts. Runs INSIDE vLLM's environment (never
imports the lab; LLM.generate is timed as bench/vllm_offline.py times it); bench/bench_presets_vllm.py
--stream-cost runs it on each architecture's prompts.

    $LAB_VLLM_PYTHON bench/vllm_stream_cost.py --model DIR --prompts prompts.json --engine-json '{…}' [--rounds 8]
        [--max-tokens 32] [--logprobs 5] [--out RESULT.json]

Both engines live in this one process and take turns, each prompt alone, so that both meet the machine in
the same state (on a shared 2-core VM its speed drifts by a third within minutes). Per round: AsyncLLM's
seconds to its first streamed token of a `--max-tokens` answer (what the lab reads as TTFT) against a
one-token `LLM.generate` (what the presets benchmark reads as vLLM's TTFT), and the seconds of the whole
answers. Both ask for the same top-K log-probabilities and get the same token ids. Prints a line per round and
the medians of AsyncLLM / LLM; `--out` writes them as JSON. `--prompts` is a JSON list of prompt texts.
"""
import argparse
import asyncio
import gc
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True, help="a JSON list of prompt texts")
    parser.add_argument("--engine-json", required=True, help="the engine arguments of both, as JSON")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--logprobs", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)
    rounds = asyncio.run(measure(args, prompts))
    gc.collect()  # AsyncLLM's finalizer, while the interpreter still has its modules (it shut down already)
    summary = {
        "rounds": rounds,
        "ttft_ratio": statistics.median(r["async_ttft_s"] / r["generate_ttft_s"] for r in rounds),
        "time_per_token_ratio": statistics.median(r["async_s"] / r["generate_s"] for r in rounds),
    }
    print(f"AsyncLLM streamed / LLM.generate, medians over {len(rounds)} rounds: TTFT {summary['ttft_ratio']:.3f}, "
          f"time per token {summary['time_per_token_ratio']:.3f}", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(summary, f)


async def measure(args: argparse.Namespace, prompts: list[str]) -> list[dict]:
    """Rounds of: each prompt alone through LLM.generate (one token, then all), then through AsyncLLM streamed."""
    from vllm import LLM, SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm_offline import alone  # beside this script

    engine = json.loads(args.engine_json)
    one = SamplingParams(temperature=0, top_p=1, max_tokens=1, ignore_eos=True, logprobs=args.logprobs)
    streamed = SamplingParams(temperature=0, top_p=1, max_tokens=args.max_tokens, ignore_eos=True,
                              logprobs=args.logprobs, output_kind=RequestOutputKind.DELTA)
    llm = LLM(model=args.model, seed=0, **engine)
    streaming = AsyncLLM.from_engine_args(AsyncEngineArgs(model=args.model, seed=0, **engine))
    counter = [0]

    async def stream(prompt: str) -> tuple[float, float, list[int]]:
        counter[0] += 1
        began, first, ids = time.perf_counter(), None, []
        async for out in streaming.generate(prompt, streamed, request_id=f"stream-{counter[0]}"):
            if out.outputs and out.outputs[0].token_ids:
                first = first if first is not None else time.perf_counter() - began
                ids += out.outputs[0].token_ids
        return first, time.perf_counter() - began, ids

    try:
        llm.generate(["Hello"], one, use_tqdm=False)  # both pay their first log-probabilities' set-up here
        await stream("Hello")
        rounds = []
        for _ in range(args.rounds):
            await asyncio.sleep(2.0)  # the worker spins 1 s after its last step
            generated = alone(llm, prompts, args.max_tokens, args.logprobs)
            await asyncio.sleep(2.0)
            stream_firsts, stream_total = [], 0.0
            for prompt, answer in zip(prompts, generated["token_ids"]):
                first, seconds, ids = await stream(prompt)
                assert ids == answer, "AsyncLLM and LLM.generate answered different token ids"
                stream_firsts.append(first)
                stream_total += seconds
            total = sum(generated["step_s"])
            row = {"async_ttft_s": statistics.median(stream_firsts), "generate_ttft_s": statistics.median(generated["ttft_s"]),
                   "async_s": stream_total, "generate_s": total}
            rounds.append(row)
            print(f"round {len(rounds)}: TTFT AsyncLLM {row['async_ttft_s'] * 1000:.0f} ms / LLM {row['generate_ttft_s'] * 1000:.0f} ms; "
                  f"answers {stream_total:.2f} s / {total:.2f} s", flush=True)
        return rounds
    finally:
        streaming.shutdown()


if __name__ == "__main__":
    main()
