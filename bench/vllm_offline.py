"""vLLM's own offline generate, timed: runs INSIDE vLLM's environment (never imports the lab).

    $LAB_VLLM_PYTHON bench/vllm_offline.py --model DIR --prompts prompts.json --max-tokens N --repeat R --out RESULT.json
    $LAB_VLLM_PYTHON bench/vllm_offline.py --model DIR --prompts pairs.json --prompt-logprobs --repeat R --out RESULT.json

Writes one JSON object to --out: load seconds, generate seconds per repeat, tokens per repeat.
Used by bench/bench_vllm_overhead.py; the settings mirror the lab's `vllm:` engine there.
`--engine-json '{"dtype": "bfloat16", "language_model_only": true, …}'` gives `LLM(...)` exactly the
engine arguments of a lab server instead (bench/bench_presets_vllm.py reads them from its `vllm serve`
command line). `--rounds-fd N` keeps the engine for rounds that the caller asks for, one line on stdin
each: a round sends each prompt alone, as a replay at concurrency 1 does, and writes one JSON line to
file descriptor N (vLLM logs to stdout) with per prompt the seconds to its first token (a generate of
one token) and to all `--max-tokens`; the first line written is the engine's start. With
`--prompt-logprobs` the prompts are `{"ids": [...], "n_prompt": K}` (a prompt's and a reference's token
ids joined, as the lab's score-reference sends them): one prefill each (`max_tokens=1`,
`prompt_logprobs=0`), and the result adds each reference token's log-probability (bench/bench_reference_vllm.py).
"""
import time

BEGAN = time.perf_counter()  # the process's start, for the engine's start-up with vLLM's import (--rounds-fd)

import argparse  # noqa: E402
import json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--max-model-len", type=int, default=16384)
    parser.add_argument("--kv-cache-gb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None, help="the result JSON (every mode but --rounds-fd)")
    parser.add_argument("--prompt-logprobs", action="store_true", help="teacher forcing: prefill token ids, one new token")
    parser.add_argument("--engine-json", default=None, help="LLM(...)'s engine arguments as JSON (replaces the defaults)")
    parser.add_argument("--rounds-fd", type=int, default=None, help="rounds of each prompt alone, one per line on stdin, "
                        "their first-token and full seconds written to this file descriptor")
    parser.add_argument("--logprobs", type=int, default=None, help="top-K log-probabilities per generated token, "
                        "as the lab's engines ask for")
    args = parser.parse_args()
    from vllm import LLM, SamplingParams

    prompts = json.load(open(args.prompts, encoding="utf-8"))
    engine = json.loads(args.engine_json) if args.engine_json else {
        "dtype": "float32", "max_model_len": args.max_model_len, "enforce_eager": True,
        "enable_prefix_caching": False, "kv_cache_memory_bytes": int(args.kv_cache_gb * 2**30)}
    start = time.perf_counter()
    llm = LLM(model=args.model, seed=0, **engine)
    ready = time.perf_counter()
    load = ready - start
    params = SamplingParams(temperature=0, top_p=1, max_tokens=args.max_tokens, ignore_eos=True, logprobs=args.logprobs)
    # the engine's first answer: what a lab server's start ends with (its probe: one token, with the
    # top-K log-probabilities the lab asks for; vLLM's first request with log-probabilities costs 1.5 s more
    # on this CPU than one without, on both sides)
    llm.generate(["Hello"], SamplingParams(max_tokens=1, logprobs=args.logprobs), use_tqdm=False)
    answered = time.perf_counter()
    if args.prompt_logprobs:
        prefill(llm, prompts, args)
        return
    if args.rounds_fd is not None:
        rounds(llm, prompts, args, ready - BEGAN, answered - BEGAN)
        return
    times, tokens = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - start)
        tokens.append(sum(len(o.outputs[0].token_ids) for o in outputs))
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"load_s": load, "generate_s": times, "tokens": tokens}, out)


def rounds(llm, prompts: list[str], args: argparse.Namespace, load: float, first_answer: float) -> None:
    """Write the engine's start to `--rounds-fd` (`load`: seconds from this process's start to a ready
    engine, vLLM's import included; `first_answer`: to its first answer), then a round of the prompts,
    each alone, per line read from stdin, until stdin closes."""
    import sys

    with open(args.rounds_fd, "w", encoding="utf-8") as results:
        results.write(json.dumps({"load_s": load, "first_answer_s": first_answer}) + "\n")
        results.flush()
        for line in sys.stdin:
            if line.strip():
                results.write(json.dumps(alone(llm, prompts, args.max_tokens, args.logprobs)) + "\n")
                results.flush()


def alone(llm, prompts: list[str], max_tokens: int, logprobs: int | None) -> dict:
    """Per prompt, alone: seconds to one generated token (its time to first token) and to `max_tokens`, and
    each answer's token ids."""
    from vllm import SamplingParams

    first = SamplingParams(temperature=0, top_p=1, max_tokens=1, ignore_eos=True, logprobs=logprobs)
    full = SamplingParams(temperature=0, top_p=1, max_tokens=max_tokens, ignore_eos=True, logprobs=logprobs)
    ttft, total, answers = [], [], []
    for prompt in prompts:
        start = time.perf_counter()
        llm.generate([prompt], first, use_tqdm=False)
        ttft.append(time.perf_counter() - start)
        start = time.perf_counter()
        out = llm.generate([prompt], full, use_tqdm=False)
        total.append(time.perf_counter() - start)
        answers.append(list(out[0].outputs[0].token_ids))
    return {"ttft_s": ttft, "step_s": total, "tokens": sum(map(len, answers)), "token_ids": answers}


def prefill(llm, pairs: list[dict], args: argparse.Namespace) -> None:
    """Time one teacher-forced prefill per pair (all pairs in one generate call, as vLLM batches them)."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=0)
    prompts = [{"prompt_token_ids": pair["ids"]} for pair in pairs]
    times, ref_logprobs = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        outputs = llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - start)
    for pair, out in zip(pairs, outputs):
        rows = out.prompt_logprobs
        ref_logprobs.append([rows[i][token].logprob for i, token in enumerate(pair["ids"]) if i >= pair["n_prompt"]])
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generate_s": times, "tokens": [sum(len(p["ids"]) for p in pairs)] * args.repeat,
                   "ref_logprobs": ref_logprobs}, f)


if __name__ == "__main__":
    main()
