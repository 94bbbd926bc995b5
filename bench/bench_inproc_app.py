"""An in-process `transformers:` engine in the app vs in `python -m lab replay`: same model, same step.

Three configurations, each process started fresh for each measurement, run interleaved round by round
(app alone, CLI, app beside, …) so the machine's load touches them alike; `uptime`'s load average is
recorded with every figure:

  app alone    a real `python app.py --engine T`, driven through gradio_client: `/generate` on the step,
               submit to the output where the column shows its answer (render, generate, parse, score,
               the columns' HTML); the last output, which adds the reference's NLL beside the F1 (one
               more prefill, after every answer), is printed beside it;
  cli          `python -m lab replay --engine T --tasks TASK --limit 1`: the step's generation time as the
               result file records it (`gen_time_sec`, 0.1 s: render, generate, parse, score);
  app beside   the app with T and a second engine (`--beside`: another in-process `transformers:`, a
               `transformers-serve:` or a `vllm:` server on CPU, same model) generating the same step at
               the same time on the same CPUs; Generate's time until both columns answered.

Prints each measurement, then the medians and the ratios app alone / cli (the lab's own cost; goal
≤ 1.2) and app beside / cli (what sharing the CPUs with a second engine costs). Each engine's share of
torch's threads follows `lab.engines.cpu_share`; `--lab DIR` drives another checkout of the lab (e.g. the
code before a change, unpacked with `git archive COMMIT | tar -x -C DIR`) with this same script.

    python bench/bench_inproc_app.py --model ~/.cache/tb2lab/models/gemma-3-270m-q4_k_m [--max-tokens 32] [--rounds 2] \\
        [--beside transformers|transformers-serve|vllm] [--only alone|beside] [--lab DIR]

Without `--model` it builds a random-weight ~40M-parameter Qwen2 (the tests' byte-level tokenizer, so
prompts are long in tokens). The README's Gemma 3 270M folder (scripts/gguf_to_folder.py) is the real one.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import Record  # noqa: E402
from tests.helpers_servers import free_port, stop_process, wait_http  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402


def load_average() -> float:
    """The 1-minute load average (what `uptime` prints first)."""
    return os.getloadavg()[0]


def build_model(folder: Path, hidden: int, layers: int) -> Path:
    """A random-weight Qwen2 with the tests' tokenizer (32768 positions), `layers` deep."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from tests.conftest import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=3 * hidden,
                         num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=2,
                         max_position_embeddings=32768, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: random-weight Qwen2, {params / 1e6:.0f}M parameters, {folder}", flush=True)
    return folder


# each kind's own options in the benchmark: CPU, float32, one prompt per batch
KIND_OPTIONS = {
    "transformers": "device=cpu&dtype=float32&batch_size=1&",
    "transformers-serve": "device=cpu&",
    "vllm": "dtype=float32&enforce_eager=true&",
}


def engine_spec(kind: str, model: str, name: str, max_tokens: int) -> str:
    """The SPEC of one engine of the benchmark (temperature 0, `max_tokens`, one prompt per batch)."""
    return f"{kind}:{model}?{KIND_OPTIONS[kind]}max_tokens={max_tokens}&name={name}"


def lab_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", "LAB_PUBLIC")}
    env.update({"GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
                "LAB_LOG_DIR": str(tmp / "logs"), "LAB_CACHE_DIR": str(tmp / "cache"), "LAB_VLLM_DEVICE": "cpu",
                "VLLM_NO_USAGE_STATS": "1"})
    return env


def engines_ready(client, names: list[str]) -> bool:
    """True once every named engine's row in the Engines table says ready (a failed one ends the bench)."""
    try:
        table = str(client.predict("", api_name="/add_engine")[0])
    except Exception:  # noqa: BLE001 - a slow answer while the model loads on a loaded machine: ask again
        return False
    for name in names:
        found = re.search(rf'<tr data-engine="{re.escape(name)}">.*?data-state="([a-z ]+)"', table, re.S)
        if found is None:
            return False
        if found.group(1) in ("failed", "crashed"):
            sys.exit(f"bench_inproc_app: engine {name} did not load:\n{table[:3000]}")
        if found.group(1) != "ready":
            return False
    return True


def time_app(lab: Path, replay: str, specs: list[str], names: list[str], step_key: str, tmp: Path,
             ready_timeout: float) -> tuple[float, float]:
    """Start the app with `specs`, wait for the engines, time one Generate on `step_key`: (until every
    column shows its answer, until its last output: each live model's reference NLL after them); stop the app."""
    from gradio_client import Client

    port = free_port()
    (tmp / "results").mkdir(exist_ok=True)
    cmd = [sys.executable, str(lab / "app.py"), "--host", "127.0.0.1", "--port", str(port), "--replay", replay,
           "--results", str(tmp / "results")]
    for spec in specs:
        cmd += ["--engine", spec]
    with open(tmp / "app.log", "ab") as log:
        proc = subprocess.Popen(cmd, cwd=lab, stdout=log, stderr=subprocess.STDOUT, env=lab_env(tmp),
                                start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, ready_timeout, proc)
        client = Client(url, verbose=False, httpx_kwargs={"timeout": 600})
        deadline = time.monotonic() + ready_timeout
        while not engines_ready(client, names):
            if time.monotonic() > deadline:
                sys.exit(f"bench_inproc_app: engines not ready after {ready_timeout:.0f} s (log: {tmp / 'app.log'})")
            time.sleep(2)
        start = time.perf_counter()
        job = client.submit(step_key, False, None, api_name="/generate")
        shown = None  # when every column first showed its answer (later outputs add the reference NLL)
        columns = ""
        for out in job:
            columns = out[0]
            if shown is None and columns.count('data-state="ready"') >= len(names):
                shown = time.perf_counter() - start
        job.result()
        took = time.perf_counter() - start
        answered = columns.count('data-state="ready"')
        if answered < len(names):
            sys.exit(f"bench_inproc_app: only {answered} of {len(names)} columns answered:\n{columns[:2000]}")
        client.close()
        return shown if shown is not None else took, took
    finally:
        stop_process(proc)


def time_cli(lab: Path, replay: str, spec: str, task: str, tmp: Path) -> float:
    """`python -m lab replay` of the task's first step; the step's generation time from its result file."""
    out = tmp / f"cli-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", replay, "--engine", spec, "--tasks", task,
           "--limit", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=lab, env=lab_env(tmp), capture_output=True, text=True, timeout=1800)
    files = sorted(out.glob("*.json"))
    if done.returncode != 0 or not files:
        sys.exit(f"bench_inproc_app: replay failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return float(json.loads(files[0].read_text())["gen_time_sec"])  # rounded to 0.1 s by the result format


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model folder (default: build a random-weight one)")
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--task", default=None, help="task whose first step is timed (default: the replay's first)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beside", choices=["transformers", "transformers-serve", "vllm"], default="transformers")
    parser.add_argument("--only", choices=["alone", "beside"], default=None, help="one app configuration only")
    parser.add_argument("--lab", type=Path, default=ROOT, help="the lab checkout to drive (default: this one)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    args = parser.parse_args()
    record = Record("bench_inproc_app", packages=("transformers", "torch", "gradio"))

    from lab.data.replay import load_replay

    steps = load_replay(args.replay).steps
    step = next(s for s in steps if args.task in (None, s.task_id))
    lab = args.lab.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-inproc-") as tmp_name:
        tmp = Path(tmp_name)
        model = args.model or str(build_model(tmp / "model", args.hidden, args.layers))
        inproc = engine_spec("transformers", model, "g-inproc", args.max_tokens)
        second = engine_spec(args.beside, model, "g-second", args.max_tokens)
        configs = {"app alone": ([inproc], ["g-inproc"]), "app beside": ([inproc, second], ["g-inproc", "g-second"])}
        if args.only:
            configs = {k: v for k, v in configs.items() if k == f"app {args.only}"}
        print(f"lab {lab}; step {step.key} (task {step.task_id}); max_tokens {args.max_tokens}; "
              f"beside: {args.beside}; {os.cpu_count()} CPUs", flush=True)
        times: dict[str, list[float]] = {name: [] for name in [*configs, "cli"]}
        totals: dict[str, list[float]] = {}  # an app's Generate until its last output
        for round_no in range(1, args.rounds + 1):
            order = [next(iter(configs)), "cli", *list(configs)[1:]]
            for name in order:
                load_before = load_average()
                extra = ""
                if name == "cli":
                    took = time_cli(lab, args.replay, inproc, step.task_id, tmp)
                else:
                    specs, names = configs[name]
                    took, total = time_app(lab, args.replay, specs, names, step.key, tmp, args.ready_timeout)
                    totals.setdefault(name, []).append(total)
                    extra = f", reference NLL beside F1 at {total:.2f} s"
                times[name].append(took)
                print(f"round {round_no} {name:>10}: {took:7.2f} s{extra}  (load average {load_before:.2f} -> "
                      f"{load_average():.2f})", flush=True)
        cli = statistics.median(times["cli"])
        print(f"\nmedians over {args.rounds} rounds (load average now {load_average():.2f}):")
        print(f"  cli        {cli:7.2f} s")
        for name in configs:
            med = statistics.median(times[name])
            ratios = [a / b for a, b in zip(times[name], times["cli"])]
            print(f"  {name:<10} {med:7.2f} s   ratio to cli {med / cli:.2f} "
                  f"(per round: {', '.join(f'{r:.2f}' for r in ratios)}); all outputs, the reference NLL "
                  f"included: {statistics.median(totals[name]):.2f} s")
        record.setting(model=Path(model).name if args.model else f"random Qwen2, hidden {args.hidden}, {args.layers} layers",
                       step=step.key, max_tokens=args.max_tokens, rounds=args.rounds, beside=args.beside)
        record.figure("python -m lab replay of the step (in-process transformers)", cli, "s",
                      note=f"median of {args.rounds}")
        for name in configs:
            med = statistics.median(times[name])
            record.figure(f"{name}: Generate until the column shows its answer", med, "s", note=f"median of {args.rounds}")
            record.figure(f"{name} / the CLI", med / cli, "x", note="goal <= 1.2 alone")
            record.figure(f"{name}: Generate until every output (the reference NLL included)",
                          statistics.median(totals[name]), "s", note=f"median of {args.rounds}")
        if "app alone" in configs:
            record.check("app alone within 1.2 x the CLI", statistics.median(times["app alone"]) / cli <= 1.2)
    record.write()


if __name__ == "__main__":
    main()
