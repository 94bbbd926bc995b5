"""vLLM's own offline generate, timed: runs INSIDE vLLM's environment (never imports the lab).

    $LAB_VLLM_PYTHON bench/vllm_offline.py --model DIR --prompts prompts.json --max-tokens N --repeat R --out RESULT.json

Writes one JSON object to --out: load seconds, generate seconds per repeat, tokens per repeat.
Used by bench/bench_vllm_overhead.py; the settings mirror the lab's `vllm:` engine there.
"""
import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--kv-cache-gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from vllm import LLM, SamplingParams

    prompts = json.load(open(args.prompts, encoding="utf-8"))
    start = time.perf_counter()
    llm = LLM(model=args.model, dtype="float32", max_model_len=args.max_model_len, enforce_eager=True,
              enable_prefix_caching=False, kv_cache_memory_bytes=int(args.kv_cache_gb * 2**30), seed=0)
    load = time.perf_counter() - start
    params = SamplingParams(temperature=0, top_p=1, max_tokens=args.max_tokens, ignore_eos=True)
    llm.generate(["warm up"], SamplingParams(max_tokens=2), use_tqdm=False)
    times, tokens = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - start)
        tokens.append(sum(len(o.outputs[0].token_ids) for o in outputs))
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"load_s": load, "generate_s": times, "tokens": tokens}, out)


if __name__ == "__main__":
    main()
