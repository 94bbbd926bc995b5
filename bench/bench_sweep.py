"""The sweep's own cost, and how fast an engine continues after its node is lost.

On a Ray cluster built on this machine (ray.cluster_utils.Cluster: a head that runs nothing and
worker nodes), with the test suite's tiny random-weight model served by `transformers serve`:

  overhead   `python -m lab replay` of the engines one after another, then `python -m lab sweep`
             of the same engines (their steps' content is identical); the difference of the wall
             times, per step. Runs with the prompt-free engines (`reference`, `stored:`), whose
             generation costs nothing, so what is left is the sweep's own cost (Ray connection,
             actor placement, streaming steps back, the driver's checkpoint) — and with two served
             tiny engines (where two nodes run in parallel).
  node loss  a served engine's node is removed after the driver received 2 steps; the time until
             the driver receives the next step from the engine re-placed on another node (its
             server's start included).

Usage:  python bench/bench_sweep.py [--steps 5]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_servers import tiny_model  # noqa: E402
from bench.record import Record  # noqa: E402
from tests.helpers_runs import untimed_steps  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402

NODE = {"num_cpus": 2, "object_store_memory": 80 * 1024 * 1024}


def lab(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(done.stderr[-2000:])
    return time.perf_counter() - t0


def overhead(cluster, specs: list[str], steps: int, tmp: Path, env: dict, label: str, record: Record) -> None:
    common = ["--replay", str(EXCERPT), "--limit", str(steps), *[a for s in specs for a in ("--engine", s)]]
    replay = lab(["replay", *common, "--out", str(tmp / f"replay-{label}")], env)
    sweep = lab(["sweep", *common, "--ray", cluster.address, "--out", str(tmp / f"sweep-{label}")], env)
    n = steps * len(specs)
    print(f"{label}: replay one after another {replay:.2f} s, sweep {sweep:.2f} s, "
          f"difference {sweep - replay:+.2f} s, {1000 * (sweep - replay) / n:+.0f} ms per step ({n} steps)")
    record.figure(f"{label}: python -m lab replay, one after another ({n} steps)", replay, "s")
    record.figure(f"{label}: python -m lab sweep on the cluster ({n} steps)", sweep, "s")
    differ = [path.name for path in sorted((tmp / f"replay-{label}").glob("*.json"))
              if steps_of(path) != steps_of(tmp / f"sweep-{label}" / path.name)]
    record.check(f"{label}: the sweep's steps equal replay's (timings aside)", not differ, ", ".join(differ))


def steps_of(path: Path) -> list[dict] | None:
    """A result file's per-step rows without their timings (None when there is no such file)."""
    if not path.is_file():
        return None
    return untimed_steps(json.loads(path.read_text())["per_step"])


def node_loss(cluster, spec: str, tmp: Path, env: dict, record: Record) -> None:
    workers = [n for n in cluster.list_all_nodes() if not n.head]
    for extra in workers[1:]:  # one worker node: the engine's; the victim
        cluster.remove_node(extra)
    victim = workers[0]
    out = tmp / "loss"
    args = [sys.executable, "-m", "lab", "sweep", "--replay", str(EXCERPT), "--limit", "5", "--chunk-size", "1",
            "--engine", spec, "--ray", cluster.address, "--out", str(out)]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = out / "ts.partial.jsonl"
    rows = lambda: checkpoint.read_text().count('"row"') if checkpoint.is_file() else 0  # noqa: E731
    try:
        while rows() < 2:
            time.sleep(0.05)
        cluster.add_node(**NODE)  # somewhere to go
        cluster.wait_for_nodes()
        before = rows()
        t0 = time.perf_counter()
        cluster.remove_node(victim)
        while rows() == before:
            time.sleep(0.02)
        lost = time.perf_counter() - t0
        print(f"node loss: next step received {lost:.2f} s after the node was removed")
        record.figure("a node removed to the next step received from the engine re-placed elsewhere", lost, "s",
                      note="its server's start on the new node included")
        proc.wait(timeout=300)
        record.check("the sweep whose node was lost ends with every step", proc.returncode == 0 and rows() == 0
                     and len(json.loads((out / "ts.json").read_text())["per_step"]) == 5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    record = Record("bench_sweep", packages=("ray", "transformers", "torch"))
    record.setting(steps=args.steps, cluster="a head and 2 nodes of 2 CPUs on this machine")
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAB_LOG_DIR": str(tmp / "logs"), "LAB_CACHE_DIR": str(tmp),
               "LAB_DB": str(tmp / "store.duckdb"), "TOKENIZERS_PARALLELISM": "false"}
        model = tiny_model(tmp / "tiny")
        lab(["replay", "--replay", str(EXCERPT), "--limit", str(args.steps), "--engine", "reference",
             "--out", str(tmp / "seed")], env)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                                 "object_store_memory": NODE["object_store_memory"]})
        try:
            for _ in range(2):
                cluster.add_node(**NODE)
            cluster.wait_for_nodes()
            overhead(cluster, ["reference", f"stored:{tmp / 'seed' / 'reference.json'}?name=st"], args.steps, tmp, env,
                     "prompt-free engines", record)
            served = f"transformers-serve:{model}?device=cpu&max_tokens=6"
            overhead(cluster, [f"{served}&name=a", f"{served}&name=b"], args.steps, tmp, env,
                     "two served tiny engines", record)
            node_loss(cluster, f"transformers-serve:{model}?device=cpu&max_tokens=24&name=ts", tmp, env, record)
        finally:
            cluster.shutdown()
    record.write()


if __name__ == "__main__":
    main()
