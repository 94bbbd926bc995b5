"""The lab's own work per step (render, generate-from-data, parse, score, checkpoint, write).

Runs a full batch replay with the `reference` engine, which answers instantly, so everything
measured is overhead. Usage:

    python bench/bench_replay_overhead.py [--replay PATH] [--repeat 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from lab.data import load_replay  # noqa: E402
from lab.engines import create_engine  # noqa: E402
from lab.runs.replay import ReplayConfig, replay  # noqa: E402

DEFAULT_REPLAY = Path(__file__).resolve().parents[2] / "shared" / "tb2lite" / "replay_excerpt.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default=str(DEFAULT_REPLAY))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--chunk-size", type=int, default=16)
    args = parser.parse_args()
    record = Record("bench_replay_overhead")

    steps = load_replay(args.replay, mode="corrected").steps
    engine = create_engine("reference")
    engine.load()
    per_step_ms = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            config = ReplayConfig(out_dir=Path(tmp), run_name=f"bench-{i}", chunk_size=args.chunk_size)
            t0 = time.perf_counter()
            replay(engine, steps, config)
            per_step_ms.append(1000 * (time.perf_counter() - t0) / len(steps))
    print(f"replay file: {args.replay} ({len(steps)} steps), {args.repeat} full replays, reference engine")
    print(f"lab overhead per step: median {statistics.median(per_step_ms):.2f} ms, "
          f"min {min(per_step_ms):.2f} ms, max {max(per_step_ms):.2f} ms "
          "(render + parse + score + fsync'd checkpoint + result file)")
    record.setting(replay=Path(args.replay).name, steps=len(steps), repeat=args.repeat, chunk_size=args.chunk_size)
    record.figure("the lab's own work per replayed step, reference engine", statistics.median(per_step_ms), "ms",
                  note=f"median of {args.repeat} full replays (min {min(per_step_ms):.2f}, max {max(per_step_ms):.2f}): "
                       "render, parse, score, fsync'd checkpoint, result file")
    record.write()


if __name__ == "__main__":
    main()
