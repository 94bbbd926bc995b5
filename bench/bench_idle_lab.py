"""An idle lab's CPU, and what the lab's queue polling costs an event.

    python bench/bench_idle_lab.py [--replay PATH] [--seconds 20] [--calls 30]

Gradio's queue looks for new events every 1 ms while it has none (and for progress to send every 10 ms);
the lab polls every QUEUE_IDLE_POLL_SEC and QUEUE_PROGRESS_POLL_SEC (lab/ui/shell/public.py, `queue_app`).
Two variants, each served by its own process started alike (this script with `--serve lab|gradio`: what
app.py does, with the lab's intervals or with Gradio's own), on the replay and no engine:

  idle CPU      the process's CPU seconds over --seconds, nobody connected, after it answered its page;
  step switch   the HTTP round trip of --calls step switches (`/show_step` through gradio_client), one
                after another: the latency the longer interval may add to an event.
"""
from __future__ import annotations

import argparse
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

VARIANTS = ("gradio", "lab")


def serve(mode: str, port: int, replay: str, results: str) -> None:
    """Serve the lab as app.py does, its queue polling as Gradio's defaults (`gradio`) or the lab's (`lab`)."""
    from lab.serve import create_context
    from lab.settings import Settings
    from lab.ui.app import build_app, launch_options
    from lab.ui.shell.public import queue_app, queue_options

    settings = Settings(results_dir=Path(results), replay_path=replay)
    demo = build_app(create_context(settings, []))
    if mode == "lab":
        queue_app(demo, queue_options(settings))
    else:
        demo.queue(**queue_options(settings))
    demo.launch(server_name="127.0.0.1", server_port=port, quiet=True, **launch_options())


def cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def measure(mode: str, replay: str, seconds: float, calls: int) -> tuple[float, list[float]]:
    """(idle CPU as a share of one core, step-switch round trips in s) of one variant's process."""
    from gradio_client import Client

    from lab.data.replay import load_replay

    port = free_port()
    with tempfile.TemporaryDirectory() as results:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", mode, "--port", str(port), "--replay", replay,
                                 "--results", results], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            url = f"http://127.0.0.1:{port}/"
            wait_http(url, 180, proc)
            time.sleep(3)  # the background warm-up of the stored engines' columns ends
            before = cpu_seconds(proc.pid)
            time.sleep(seconds)
            idle = (cpu_seconds(proc.pid) - before) / seconds
            client = Client(url, verbose=False)
            steps = [step.key for step in load_replay(replay).steps]
            trips = []
            for i in range(calls):
                began = time.perf_counter()
                client.predict(steps[i % len(steps)], False, None, api_name="/show_step")
                trips.append(time.perf_counter() - began)
            return idle, trips
        finally:
            stop_process(proc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--seconds", type=float, default=20.0, help="idle seconds measured per variant")
    parser.add_argument("--calls", type=int, default=30, help="step switches timed per variant")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, args.replay, args.results)
        return 0
    from lab.ui.shell.public import QUEUE_IDLE_POLL_SEC, QUEUE_PROGRESS_POLL_SEC

    record = Record("bench_idle_lab", packages=("gradio", "gradio_client", "psutil"))
    record.setting(replay=Path(args.replay).name, idle_seconds=args.seconds, calls=args.calls,
                   lab_poll_s=QUEUE_IDLE_POLL_SEC, lab_progress_poll_s=QUEUE_PROGRESS_POLL_SEC)
    for mode in VARIANTS:
        idle, trips = measure(mode, args.replay, args.seconds, args.calls)
        who = "Gradio's intervals (1 ms, 10 ms)" if mode == "gradio" else (
            f"the lab's intervals ({1000 * QUEUE_IDLE_POLL_SEC:g} ms, {1000 * QUEUE_PROGRESS_POLL_SEC:g} ms)")
        median = 1000 * statistics.median(trips)
        print(f"{who}: idle CPU {100 * idle:.2f} % of a core; step switch round trip median {median:.1f} ms, "
              f"max {1000 * max(trips):.1f} ms")
        record.figure(f"idle lab's CPU, {who}", 100 * idle, "% of a core", note=f"over {args.seconds:g} s")
        record.figure(f"step switch round trip, {who}", median, "ms",
                      note=f"median of {args.calls}; max {1000 * max(trips):.1f} ms")
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
