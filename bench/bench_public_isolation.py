"""Public mode: does one greedy visitor slow the others? A bystander's Compare step switch
(HTTP round trip and JSON size through gradio_client) before and after another visitor tries
to add 60 `stored:` engines.

    python bench/bench_public_isolation.py [--replay PATH] [--greedy 60]

Runs the real app (public mode, the owner's `reference` engine) on 127.0.0.1 in this process.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import Record  # noqa: E402
from lab.settings import Settings  # noqa: E402
from tests.helpers_servers import free_port  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402
from tests.ui.test_ui_handlers import write_stored_run  # noqa: E402


def switch_costs(client, keys: list[str]) -> tuple[float, int]:
    """Median ms and max bytes of /show_step over `keys`."""
    times, sizes = [], []
    for key in keys:
        t0 = time.perf_counter()
        result = client.predict(key, False, None, api_name="/show_step")
        times.append(time.perf_counter() - t0)
        sizes.append(len(json.dumps(result, default=str).encode()))
    return 1000 * statistics.median(times), max(sizes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--greedy", type=int, default=60, help="stored engines the greedy visitor tries to add")
    args = parser.parse_args()
    record = Record("bench_public_isolation", packages=("gradio", "gradio_client"))
    record.setting(greedy=args.greedy, replay=Path(args.replay).name)
    from gradio_client import Client

    from lab.serve import create_context
    from lab.ui.app import build_app, launch_options
    from lab.ui.shell.public import queue_app

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = root / "results" / "runs"
        write_stored_run(runs / "run0.json", "run0")
        base = json.loads((runs / "run0.json").read_text())
        for i in range(1, args.greedy):
            base["model"] = base["model_short"] = f"run{i}"
            (runs / f"run{i}.json").write_text(json.dumps(base))
        settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                            cache_dir=root / "cache", replay_path=args.replay, public=True)
        ctx = create_context(settings, ["reference"])
        ctx.pool.wait()
        demo = build_app(ctx)
        port = free_port()
        queue_app(demo).launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                               **launch_options())
        try:
            url = f"http://127.0.0.1:{port}/"
            keys = ctx.step_keys()
            bystander, greedy = Client(url, verbose=False), Client(url, verbose=False)
            switch_costs(bystander, keys[:3])  # warm-up
            before = switch_costs(bystander, keys)
            t0 = time.perf_counter()
            table = ""
            for i in range(args.greedy):
                table = greedy.predict(f"stored:{runs / f'run{i}.json'}", api_name="/add_engine")[0]
            added = len(re.findall(r"<tr[^>]*><td><b>", table)) - 1
            print(f"greedy visitor: asked for {args.greedy} stored engines in {time.perf_counter() - t0:.1f} s, "
                  f"got {added} (the per-visitor cap); pool holds {len(ctx.pool.names())} engines")
            after = switch_costs(bystander, keys)
            mine = switch_costs(greedy, keys)
            print(f"bystander /show_step before: median {before[0]:.1f} ms, max {before[1] / 1024:.0f} KiB")
            print(f"bystander /show_step after:  median {after[0]:.1f} ms, max {after[1] / 1024:.0f} KiB")
            print(f"greedy visitor's own switch: median {mine[0]:.1f} ms, max {mine[1] / 1024:.0f} KiB")
            record.figure(f"engines admitted of the {args.greedy} one visitor asked for", added, "engines")
            record.figure("a bystander's /show_step before", before[0], "ms", note=f"median; max {before[1] / 1024:.0f} KiB")
            record.figure("a bystander's /show_step after", after[0], "ms", note=f"median; max {after[1] / 1024:.0f} KiB")
            record.figure("the greedy visitor's own /show_step", mine[0], "ms", note=f"median; max {mine[1] / 1024:.0f} KiB")
            record.check("a bystander's payload unchanged by another visitor's engines", after[1] == before[1])
        finally:
            demo.close()
            ctx.pool.close_all()
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
