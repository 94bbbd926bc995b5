"""Benchmark: the cost of safe input handling.

    python bench/bench_input_safety.py [--repeat 5]

1. Fenced-JSON extraction on 256 KB of "```{" and on other adversarial texts: the lab's linear scan
   against the harness's backtracking regex (same span on every input; the regex is timed once).
2. Validating a 303-step result file (bench/synthetic.py) with the one validator, per file.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from bench.synthetic import make_results  # noqa: E402
from lab.resultfiles.files import parse_result_bytes  # noqa: E402
from lab.scoring.parse import fenced_json, parse_action  # noqa: E402

HARNESS_FENCE = re.compile(r"```(?:json)?\s*(\{.*\})\s*```", re.DOTALL)
TEXTS = {
    '256 KB of "```{"': "```{" * 65536,
    '256 KB of "```{" + "}```"': "```{" * 65536 + "}```",
    "240 KB of backticks after a {": "{" + "```" * 80000,
}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    record = Record("bench_input_safety")
    record.setting(repeat=args.repeat)
    for name, text in TEXTS.items():
        match = HARNESS_FENCE.search(text)
        assert fenced_json(text) == (match.group(1) if match else None)
        lab = best(lambda: parse_action(text), args.repeat)
        harness = best(lambda: HARNESS_FENCE.search(text), 1)
        print(f"{name}: parse_action {1000 * lab:.1f} ms (harness regex alone {1000 * harness:.0f} ms)")
        record.figure(f"parse_action on {name}", 1000 * lab, "ms", note=f"best of {args.repeat}")
        record.figure(f"the harness's fence regex alone on {name}", 1000 * harness, "ms")
    [result] = make_results(n_runs=1, n_steps=303, seed=1)
    content = json.dumps(result).encode("utf-8")
    per_file = best(lambda: parse_result_bytes(content, "synthetic.json"), args.repeat)
    print(f"decode + validate one 303-step result file ({len(content) / 1024:.0f} KiB): {1000 * per_file:.1f} ms")
    record.figure(f"decode + validate one 303-step result file ({len(content) / 1024:.0f} KiB)", 1000 * per_file, "ms",
                  note=f"best of {args.repeat}")
    record.check("fenced-JSON extraction agrees with the harness's regex on every text", True, "asserted above")
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
