"""The GPU proof (../shared/gpu/README.md): three managed vLLM engines on one GPU, the replay on each alone
and on all three at once. Runs ON the GPU machine, with vLLM's `vllm` in $LAB_VLLM:

    LAB_VLLM=/root/site/bin/vllm python bench/gpu/proof.py --models .gpu/models --replay replay_scaled.jsonl --out OUT

The models come from bench/gpu/models.py (Qwen3 dimensions, no weights: `--load-format dummy`); the replay
from `bench/scale_replay.py --distinct` (303 steps). Scenarios, in this order; each is written to
OUT/gpu_proof.json as it ends, and each has a time cap (a replay past it is stopped, and its figures cover
the steps it finished), so a run cut short keeps what it measured:

  start      the lab's pool adds the three engines at once: 0.6B with its LoRA, 1.7B and 8B, each a managed
             `vllm serve`, started one after another; the 8B asks for 0.45 of the GPU, the other two split
             what is left of the lab's budget. Per engine: seconds to ready, GPU memory of its processes (as
             the Engines tab reads it)
  together   all three replay the steps at once (lab.runs.replay.replay, what `python -m lab replay` and
             Batch run; three threads): per engine seconds per step, TTFT p50/p95
  alone      each engine replays the first `--alone-steps` steps by itself: the same figures
  compare    "Generate on all engines": steps one after another, each answered by all three at once (the
             Compare tab runs each engine's step in its own thread): seconds per step, TTFT per engine
  cli        `python -m lab replay --engine openai:URL#MODEL --limit N` against the 0.6B's running server
  offline    the engines closed: vLLM's offline `LLM.generate` of the prompts the 1.7B answered alone, with
             its server's engine arguments (bench/vllm_offline.py); the lab's overhead = its `alone` s / these

A capped replay's seconds per step overstate: the cap's seconds include the requests still in flight when
it came, which its steps do not count. Uncapped figures are the ones to compare.

Every answer is `--max-tokens` tokens (`ignore_eos`, temperature 0), with the lab's top-5 log-probabilities.
Each scenario starts from an empty prefix cache (POST /reset_prefix_cache; VLLM_SERVER_DEV_MODE=1).
`--smoke`: the 0.6B with its LoRA alone, three steps, and the CLI on `--cli-steps` (a check that the
environment serves at all).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.vllm_args import engine_arguments  # noqa: E402
from lab.data.replay import load_replay  # noqa: E402
from lab.engines.base import Sampling  # noqa: E402
from lab.engines.pool import READY, EnginePool  # noqa: E402
from lab.runs.checkpoint import Checkpoint  # noqa: E402
from lab.prompts.engine_prompt import render_for_engine  # noqa: E402
from lab.runs.pipeline import run_steps  # noqa: E402
from lab.runs.replay import ReplayConfig, replay  # noqa: E402

# name -> (model folder, SPEC options beyond the common ones)
ENGINES = {
    "q06-lora": ("qwen3-0.6b", "lora={models}/lora-0.6b"),
    "q17": ("qwen3-1.7b", ""),
    "q8": ("qwen3-8b", "gpu_memory_utilization=0.45"),
}
OFFLINE_ENGINE, CLI_ENGINE = "q17", "q06-lora"


class Report:
    """The results so far, rewritten to OUT/gpu_proof.json after each scenario."""

    def __init__(self, out: Path, meta: dict) -> None:
        self.path, self.data = out / "gpu_proof.json", {"meta": meta, "scenarios": {}}
        self.began = time.perf_counter()

    def put(self, name: str, value: dict) -> None:
        self.data["scenarios"][name] = {**value, "at_s": round(time.perf_counter() - self.began, 1)}
        self.path.write_text(json.dumps(self.data, indent=1), encoding="utf-8")
        print(f"== {name}: {json.dumps(value)[:1500]}", flush=True)


def specs(models: Path, max_tokens: int, names: list[str]) -> list[str]:
    """The engines' SPECs: random weights, bfloat16, eager, every answer `max_tokens` long."""
    common = (f"load_format=dummy&dtype=bfloat16&enforce_eager=true&max_tokens={max_tokens}&ignore_eos=true"
              "&temperature=0&ready_timeout=600")
    out = []
    for name in names:
        folder, extra = ENGINES[name]
        options = "&".join(o for o in (extra.format(models=models), common, f"name={name}") if o)
        out.append(f"vllm:{models / folder}?{options}")
    return out


def nvidia_smi(*query: str) -> str | None:
    """nvidia-smi's CSV answer to `query`; None where it is not there (a dry run on CPU)."""
    try:
        done = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def reset_prefix_cache(engine) -> bool:
    """Empty the server's prefix cache (a dev-mode endpoint); False where it did not answer 200."""
    try:
        return httpx.post(f"{engine.server.base_url}/reset_prefix_cache", timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank `q` quantile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def figures(rows: list[dict], wall: float, total: int) -> dict:
    """A replay's figures from its per-step rows and wall seconds."""
    ttft = [float(r["ttft_s"]) for r in rows if r.get("ttft_s") is not None]
    return {"steps": len(rows), "of": total, "wall_s": round(wall, 2),
            "s_per_step": round(wall / len(rows), 4) if rows else None,
            "ttft_p50_s": percentile(ttft, 0.5), "ttft_p95_s": percentile(ttft, 0.95),
            "errors": sorted({str(r["error"])[:200] for r in rows if r.get("error")})[:3],
            "completion_tokens": sum(int(r.get("completion_tokens") or 0) for r in rows),
            "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in rows)}


def capped_replay(engine, steps, out: Path, max_tokens: int, cap_s: float) -> dict:
    """The lab's replay of `steps`, stopped after `cap_s`; figures over the steps it finished."""
    stop = threading.Event()
    timer = threading.Timer(cap_s, stop.set)
    config = ReplayConfig(out_dir=out, sampling=Sampling(temperature=0, max_tokens=max_tokens))
    began = time.perf_counter()
    timer.start()
    try:
        path = replay(engine, steps, config, stop=stop)
        rows = json.loads(path.read_text(encoding="utf-8"))["per_step"]
        capped = False
    except InterruptedError:
        _, entries = Checkpoint(next(out.glob("*.partial.jsonl"))).read_entries()
        rows, capped = [e.row for e in entries], True
    finally:
        timer.cancel()
    value = {**figures(rows, time.perf_counter() - began, len(steps)), "capped": capped}
    return value, {f"{r['task_id']}/{r['step_idx']}" for r in rows}


def scenario_replays(pool, names, steps, out, args, report, key, together: bool) -> tuple[dict, dict]:
    """Each engine's capped replay, all at once or one after another: (figures, finished step keys) per engine."""
    caches = {n: reset_prefix_cache(pool.get(n)) for n in names}
    results: dict[str, dict] = {}
    finished: dict[str, set[str]] = {}

    def one(name: str) -> None:
        try:
            results[name], finished[name] = capped_replay(pool.get(name), steps, out / key / name, args.max_tokens,
                                                          args.cap_together if together else args.cap_alone)
        except Exception as exc:  # noqa: BLE001 - one engine's failure is a result too
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:500]}

    if together:
        threads = [threading.Thread(target=one, args=(n,)) for n in names]
        [t.start() for t in threads]
        [t.join() for t in threads]
    else:
        for name in names:
            reset_prefix_cache(pool.get(name))
            one(name)
    report.put(key, {"engines": results, "prefix_cache_reset": caches})
    return results, finished


def scenario_compare(pool, names, steps, args, report) -> None:
    """Generate on all engines, step after step (each engine's step in its own thread, as Compare does)."""
    for n in names:
        reset_prefix_cache(pool.get(n))
    sampling = Sampling(temperature=0, max_tokens=args.max_tokens)
    walls, ttft = [], {n: [] for n in names}
    began = time.perf_counter()
    with ThreadPoolExecutor(len(names)) as ex:
        for step in steps[: args.compare_steps]:
            if time.perf_counter() - began > args.cap_compare:
                break
            t = time.perf_counter()
            answers = list(ex.map(lambda n: run_steps(pool.get(n), [step], sampling)[0], names))
            walls.append(time.perf_counter() - t)
            for n, a in zip(names, answers):
                if a.completion.ttft_s is not None:
                    ttft[n].append(a.completion.ttft_s)
    report.put("compare", {"steps": len(walls), "s_per_step_p50": percentile(walls, 0.5),
                           "s_per_step_p95": percentile(walls, 0.95),
                           "ttft": {n: {"p50_s": percentile(v, 0.5), "p95_s": percentile(v, 0.95)} for n, v in ttft.items()}})


def scenario_cli(engine, replay_path: Path, out: Path, args, report) -> None:
    """The batch CLI itself, against a running server (its own process: render, stream, parse, score, file)."""
    reset_prefix_cache(engine)
    spec = f"openai:{engine.server.base_url}/v1#{engine.served_model()}?ignore_eos=true&tokenizer={engine.model_source}"
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(replay_path), "--engine", spec,
           "--out", str(out / "cli"), "--max-tokens", str(args.max_tokens), "--temperature", "0", "--name", "cli",
           "--limit", str(args.cli_steps)]
    began = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=args.cap_cli)
        wall = time.perf_counter() - began
        result = out / "cli" / "cli.json"
        if done.returncode or not result.exists():
            report.put("cli", {"error": (done.stderr or done.stdout)[-800:], "rc": done.returncode})
            return
        rows = json.loads(result.read_text(encoding="utf-8"))["per_step"]
        report.put("cli", {**figures(rows, wall, len(rows)), "note": "wall includes the CLI's start and imports"})
    except subprocess.TimeoutExpired:
        report.put("cli", {"error": f"did not finish within {args.cap_cli} s"})


def scenario_offline(folder: Path, llm_args: dict, prompts: list[str], lab_alone: dict | None, out: Path, args,
                     report) -> None:
    """vLLM's offline generate of `prompts` with the lab server's engine arguments, against the lab's alone run."""
    (out / "offline_prompts.json").write_text(json.dumps(prompts), encoding="utf-8")
    python = str(Path(os.environ["LAB_VLLM"]).with_name("python"))
    python = python if Path(python).exists() else sys.executable
    cmd = [python, str(ROOT / "bench" / "vllm_offline.py"), "--model", str(folder), "--prompts",
           str(out / "offline_prompts.json"), "--max-tokens", str(args.max_tokens), "--repeat", "1",
           "--engine-json", json.dumps(llm_args), "--logprobs", "5", "--out", str(out / "offline.json")]
    began = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.cap_offline)
    except subprocess.TimeoutExpired:
        report.put("offline", {"error": f"did not finish within {args.cap_offline} s"})
        return
    (out / "offline.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode:
        report.put("offline", {"error": done.stderr[-1500:], "rc": done.returncode})
        return
    result = json.loads((out / "offline.json").read_text(encoding="utf-8"))
    seconds = result["generate_s"][0]
    value = {"steps": len(prompts), "load_s": round(result["load_s"], 1), "generate_s": round(seconds, 2),
             "s_per_step": round(seconds / len(prompts), 4), "tokens": result["tokens"][0],
             "process_s": round(time.perf_counter() - began, 1)}
    if lab_alone and lab_alone.get("s_per_step"):
        value["lab_over_vllm"] = round(lab_alone["s_per_step"] / value["s_per_step"], 3)
    report.put("offline", value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, type=Path)
    parser.add_argument("--replay", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--smoke", action="store_true")
    # defaults sized from the first H100 run (bench/gpu/records/) to end within run.sh's 480 s: starts
    # ~150 s, together ≤ 90 s, alone ~50 s (64 steps of 0.16–0.33 s each engine), Compare ≤ 30 s, CLI ≤ 40 s,
    # offline ≤ 100 s (its engine's start included)
    parser.add_argument("--cap-together", type=float, default=90)
    parser.add_argument("--alone-steps", type=int, default=64)
    parser.add_argument("--cap-alone", type=float, default=40)
    parser.add_argument("--compare-steps", type=int, default=5)
    parser.add_argument("--cap-compare", type=float, default=30)
    parser.add_argument("--cli-steps", type=int, default=32)
    parser.add_argument("--cap-cli", type=float, default=40)
    parser.add_argument("--cap-offline", type=float, default=100)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LAB_LOG_DIR", str(args.out / "logs"))
    os.environ.update({"VLLM_SERVER_DEV_MODE": "1", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"})
    models = args.models.resolve()
    names = ["q06-lora"] if args.smoke else list(ENGINES)
    steps = load_replay(args.replay).steps[: 3 if args.smoke else None]
    smi = nvidia_smi("--query-gpu=name,memory.total,driver_version")
    report = Report(args.out, {"gpu": smi, "steps": len(steps), "max_tokens": args.max_tokens, "engines": names,
                               "specs": specs(models, args.max_tokens, names)})
    pool = EnginePool(allow_loading=True)
    began = time.perf_counter()
    pool.add_many(specs(models, args.max_tokens, names), names)
    pool.wait(timeout=900)
    start = {}
    for row in pool.status():
        engine = pool.get(row["name"])
        ready = row["state"] == READY
        start[row["name"]] = {"state": row["state"], "error": row.get("error"), "load_s": engine.load_time_sec,
                              "gpu_memory_utilization": engine.gpu_memory_utilization,
                              # the figure the Engines tab shows: NVML, the server's processes (lab.engines.servers)
                              "gpu_memory_gb": engine.server_status()["gpu_memory_gb"] if ready else None,
                              "argv": engine.server_argv(0)[1:] if ready else None}
    report.put("start", {"engines": start, "all_ready_s": round(time.perf_counter() - began, 1),
                         "gpu_memory_used_mib": nvidia_smi("--query-gpu=memory.used")})
    ready = [n for n in names if start[n]["state"] == READY]
    try:
        if not ready:
            return
        scenario_replays(pool, ready, steps, args.out / "runs", args, report, "together", True)
        if args.smoke:
            scenario_cli(pool.get(CLI_ENGINE), args.replay, args.out, args, report)
            return
        alone, finished = scenario_replays(pool, ready, steps[: args.alone_steps], args.out / "runs", args, report,
                                           "alone", False)
        scenario_compare(pool, ready, steps, args, report)
        if CLI_ENGINE in ready:
            scenario_cli(pool.get(CLI_ENGINE), args.replay, args.out, args, report)
        if OFFLINE_ENGINE in ready:
            engine = pool.get(OFFLINE_ENGINE)
            llm_args = engine_arguments(engine.server_argv(0))
            lab_alone = alone.get(OFFLINE_ENGINE) or {}
            done_keys = finished.get(OFFLINE_ENGINE) or {s.key for s in steps}
            prompts = [render_for_engine(engine, s).text for s in steps if s.key in done_keys]
            pool.close_all()
            scenario_offline(models / ENGINES[OFFLINE_ENGINE][0], llm_args, prompts, lab_alone, args.out, args,
                             report)
    finally:
        pool.close_all()
        print(json.dumps(report.data["scenarios"], indent=1)[:6000], flush=True)


if __name__ == "__main__":
    main()
