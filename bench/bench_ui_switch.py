"""Step-switch cost in Compare with 4 stored engines: server time per switch and bytes sent.

    python bench/bench_ui_switch.py [--replay PATH] [--rounds N]

Builds 4 stored result files from the replay (reference answers with altered units), then
(1) times the switch handler (`lab.ui.compare.handlers.step_outputs`) directly, cold (first visit)
and warm (cached columns), and (2) measures the JSON the browser receives for one switch,
over HTTP through gradio_client against the real app on 127.0.0.1.
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

from tests.paths import EXCERPT  # noqa: E402
from tests.helpers_servers import free_port  # noqa: E402
from bench.record import Record  # noqa: E402
from bench.stored_lab import stored_lab  # noqa: E402


def payload_bytes(out) -> int:
    """Size of the JSON Gradio sends for one switch (HTML strings, dropdown updates, plotly JSON)."""
    fig = out.heat_figure.to_json() if out.heat_figure is not None else "null"
    body = json.dumps([out.task_id, out.step_choices, out.step_key, out.context_html, out.columns_html,
                       out.f1_html, out.heat_choices, out.heat_engine, out.run_block.choices,
                       out.run_block.baseline, out.run_block.html])
    return len(body.encode()) + len(fig.encode())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    record = Record("bench_ui_switch", packages=("gradio", "plotly"))
    from lab.ui.app import build_app, launch_options
    from lab.ui.shell.public import queue_app
    from lab.ui.compare.handlers import step_outputs

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ctx = stored_lab(root, args.replay, 4, "run")
        keys = ctx.step_keys()
        from lab.ui.compare.answers import warm_instant_engines

        t0 = time.perf_counter()
        warm_instant_engines(ctx).join()  # what the app does in the background at start
        print(f"background precompute of 4 stored engines x {len(keys)} steps: {time.perf_counter() - t0:.1f} s")
        cold, warm, sizes = [], [], []
        for r in range(args.rounds):
            for key in keys:
                t0 = time.perf_counter()
                out = step_outputs(ctx, key)
                (cold if r == 0 else warm).append(time.perf_counter() - t0)
                sizes.append(payload_bytes(out))
        print(f"engines: 4 stored · steps: {len(keys)} · replay: {args.replay}")
        print(f"server switch time, after precompute, first visit: median "
              f"{1000 * statistics.median(cold):.1f} ms, max {1000 * max(cold):.1f} ms "
              f"(very first call {1000 * cold[0]:.1f} ms, includes lazy imports)")
        if warm:
            print(f"server switch time, cached:      median {1000 * statistics.median(warm):.1f} ms, "
                  f"max {1000 * max(warm):.1f} ms")
        print(f"payload per switch: median {statistics.median(sizes) / 1024:.0f} KiB, max {max(sizes) / 1024:.0f} KiB")
        record.setting(engines="4 stored", steps=len(keys), replay=Path(args.replay).name, rounds=args.rounds)
        record.figure("server time per step switch, first visit after the background precompute",
                      1000 * statistics.median(cold), "ms", note=f"median; max {1000 * max(cold):.1f} ms")
        if warm:
            record.figure("server time per step switch, cached", 1000 * statistics.median(warm), "ms",
                          note=f"median; max {1000 * max(warm):.1f} ms")
        record.figure("payload per switch", max(sizes) / 1024, "KiB", note="max")

        demo = build_app(ctx)
        port = free_port()
        queue_app(demo).launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                               **launch_options())
        try:
            from gradio_client import Client

            client = Client(f"http://127.0.0.1:{port}/", verbose=False)
            times, http_sizes = [], []
            for key in keys:
                t0 = time.perf_counter()
                result = client.predict(key, False, None, api_name="/show_step")
                times.append(time.perf_counter() - t0)
                http_sizes.append(len(json.dumps(result, default=str).encode()))
            print(f"HTTP round trip (gradio_client, /show_step): median {1000 * statistics.median(times):.1f} ms, "
                  f"max {1000 * max(times):.1f} ms; JSON received max {max(http_sizes) / 1024:.0f} KiB")
            record.figure("HTTP round trip of /show_step (gradio_client)", 1000 * statistics.median(times), "ms",
                          note=f"median; max {1000 * max(times):.1f} ms")
        finally:
            demo.close()
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
