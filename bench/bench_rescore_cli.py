"""Benchmark: `python -m lab rescore` of one 2,000-step result file vs a straightforward scorer.

    python bench/bench_rescore_cli.py [--steps 2000 --rounds 5]

Both sides are a fresh process, so process start and imports count: the lab's command
(`python -m lab rescore IN -o OUT`) against a plain script that reads the same file, calls
`score_units` on every step in turn and writes the rescored file (`--straightforward IN OUT`, this
file). Rounds alternate the two; the figure is the ratio of the medians (straightforward / lab).
Both outputs must hold the same per-step numbers.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")


def straightforward(src: str, dst: str) -> None:
    """Score every step with score_units, one after another, and write the file."""
    sys.path.insert(0, str(ROOT))
    from lab.scoring.metrics import score_units

    result = json.loads(Path(src).read_text(encoding="utf-8"))
    for row in result["per_step"]:
        row.update(score_units(row["pred_command_units"], row["ref_command_units"]).to_dict())
    Path(dst).write_text(json.dumps(result), encoding="utf-8")


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--straightforward", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.straightforward:
        straightforward(*args.straightforward)
        return 0

    sys.path.insert(0, str(ROOT))
    from bench.record import Record
    from bench.synthetic import make_results

    record = Record("bench_rescore_cli", argv=list(sys.argv[1:] if argv is None else argv))
    record.setting(steps=args.steps, rounds=args.rounds)

    with tempfile.TemporaryDirectory(prefix="bench-rescore-cli-") as tmp:
        src, lab_out, plain_out = (Path(tmp) / n for n in ("run.json", "lab.json", "plain.json"))
        src.write_text(json.dumps(make_results(n_runs=1, n_steps=args.steps, seed=0)[0]), encoding="utf-8")
        lab_cmd = [sys.executable, "-m", "lab", "rescore", str(src), "-o", str(lab_out)]
        plain_cmd = [sys.executable, str(Path(__file__).resolve()), "--straightforward", str(src), str(plain_out)]
        lab_s, plain_s = [], []
        for _ in range(args.rounds):
            lab_s.append(timed(lab_cmd))
            plain_s.append(timed(plain_cmd))
        lab_rows = json.loads(lab_out.read_text())["per_step"]
        plain_rows = json.loads(plain_out.read_text())["per_step"]
        same = all(a[k] == b[k] for a, b in zip(lab_rows, plain_rows) for k in KEYS) and len(lab_rows) == len(plain_rows)
    lab_m, plain_m = statistics.median(lab_s), statistics.median(plain_s)
    print(f"steps {args.steps}  rounds {args.rounds} (alternated)")
    print(f"python -m lab rescore: median {lab_m:.2f}s (all: {', '.join(f'{t:.2f}' for t in lab_s)})")
    print(f"straightforward score_units: median {plain_m:.2f}s (all: {', '.join(f'{t:.2f}' for t in plain_s)})")
    print(f"ratio {plain_m / lab_m:.1f}x  (min-based {min(plain_s) / min(lab_s):.1f}x)")
    print(f"identical numbers on every step: {same}")
    record.figure(f"python -m lab rescore, one {args.steps:,}-step file, fresh process", lab_m, "s",
                  note=f"median of {args.rounds} alternated rounds")
    record.figure("straightforward score_units step by step, fresh process", plain_m, "s",
                  note=f"median of {args.rounds} alternated rounds")
    record.figure("speed-up of the lab's command", plain_m / lab_m, "x", note="ratio of the medians")
    record.check("identical numbers on every step", same)
    record.write()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
