"""Published runs at scale: 100 result files of realistic size (≈1.5 MB, 303 steps) made from the two
real published ones, served by a loopback HTTP server under catalogue paths. First a Space-like app
(`python app.py`, public mode) whose owner set LAB_PUBLISHED to those 100 runs: seconds from process
start to serving, cold and on a restart, and when its background equiv_f1 fill is done. Then the
files fetched and imported the way `python -m lab data published fetch` does; the Compare step
switch with 8 published columns and a Triage slice over all 100 runs.

    python bench/bench_published.py            # writes only to a temporary folder
    python bench/bench_published.py --only start   # just the app start with LAB_PUBLISHED of 100 runs
    BENCH_PROFILE=1 python bench/bench_published.py --files 10   # plus a cProfile of 20 step switches

The 303-step replay is the excerpt repeated under new task ids (bench/scale_replay.py's recipe), and
each synthetic file answers exactly those steps, so Compare columns line up.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import http.server
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Record  # noqa: E402
from lab.data import load_replay  # noqa: E402
from lab.data.conversations import step_record  # noqa: E402
from lab.published.catalogue import load_catalogue, runs_of  # noqa: E402
from lab.settings import Settings  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "tb2lite"
SOURCES = [SHARED / "published" / "llada21_flash_transformers_sample10_suffix_len256.json",
           SHARED / "published" / "llada21_flash_transformers_smoke.json"]
TARGET_BYTES = 1_500_000
REPO = Path(__file__).resolve().parents[1]
CSV_FILES = ("leaderboard_corrected.csv", "leaderboard_legacy_20260426.csv", "leaderboard_by_group.csv",
             "tblite_tmax.csv")


def scaled_replay(out: Path, steps: int = 303) -> list:
    """The excerpt's steps repeated under new task ids (as bench/scale_replay.py)."""
    base = load_replay(str(SHARED / "replay_excerpt.jsonl")).steps
    rows, n = [], 0
    while len(rows) < steps:
        src = base[0].task_id if n % 2 == 0 else base[-1].task_id
        for step in (s for s in base if s.task_id == src):
            rows.append(dataclasses.replace(step, task_id=f"task-{n:03d}", sample_idx=n))
        n += 1
    rows = rows[:steps]
    out.write_text("".join(json.dumps(step_record(s), ensure_ascii=False) + "\n" for s in rows))
    return rows


def synthetic_result(template_rows: list[dict], top: dict, steps: list, seed: int) -> dict:
    """A 303-step result file: the real rows (matched by source step) re-keyed to the scaled replay,
    F1 varied per file, raw output padded to a realistic size."""
    rng = random.Random(seed)
    per_step = []
    for i, step in enumerate(steps):
        row = dict(template_rows[i % len(template_rows)])
        row.update(task_id=step.task_id, step_idx=step.step_idx, sample_idx=step.sample_idx,
                   bucket=step.bucket, source_group=step.source_group)
        f1 = round(rng.random(), 4)
        row.update(command_f1=f1, command_precision=f1, command_recall=f1, first_cmd_exact=float(f1 > 0.7))
        per_step.append(row)
    body = json.dumps(per_step)
    pad = max(0, (TARGET_BYTES - len(body)) // len(per_step))
    for row in per_step:
        row["raw_output"] = (str(row.get("pred_preview") or "") + " " * pad)[: max(pad, 1)]
    from lab.scoring.aggregate import aggregate_scores

    return {**top, "model_short": f"bench-{seed}", "per_step": per_step, "aggregate": aggregate_scores(per_step)}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve(root: Path):
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def wait_serving(url: str, proc: subprocess.Popen, timeout: float) -> None:
    """Poll `url` until it answers 200 (RuntimeError when the process exits first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with code {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f} s")


def pending_equiv(db: Path) -> int | None:
    """Runs the app has not filled equiv columns for yet (None before the store has runs). Waits
    for its turn on the file like any lab process (lab.store.connection)."""
    from lab.store.connection import Connector

    connector = Connector(db, linger=0, timeout=120)
    try:
        with connector.cursor() as cur:
            return cur.execute("SELECT count(*) FILTER (equiv_state = 'pending') FROM runs").fetchall()[0][0]
    except Exception:  # noqa: BLE001 - no runs table yet, or an older schema without equiv_state
        return None
    finally:
        connector.close()


def app_start(root: Path, base: str, runs: list, replay: Path, label: str, timeout: float = 600) -> tuple[float, float]:
    """Seconds from `python app.py` starting to it serving, on a Space-like setup (public mode) whose
    owner set LAB_PUBLISHED to `runs`; files come from `base`. Then how long its background equiv
    fill takes (both returned). The folders under `root` are kept, so a second call is a restart with a warm cache."""
    results = root / "results"
    if not results.exists():
        results.mkdir(parents=True)
        for name in CSV_FILES:
            (results / name).write_bytes((REPO / "results" / name).read_bytes())
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAB_")}
    env.update(SPACE_ID="bench/published", GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1",
               LAB_PUBLISHED=",".join(r.key for r in runs), LAB_PUBLISHED_BASE_URL=base, LAB_RESULTS=str(results),
               LAB_CACHE_DIR=str(root / "cache"), LAB_DB=str(root / "lab.duckdb"), LAB_REPLAY=str(replay))
    log = open(root / f"app-{label}.log", "wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(REPO / "app.py"), "--host", "127.0.0.1", "--port", str(port)],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_serving(f"http://127.0.0.1:{port}/", proc, timeout)
        serving = time.perf_counter() - t0
        pending = pending_equiv(root / "lab.duckdb")
        while pending:
            time.sleep(2)
            pending = pending_equiv(root / "lab.duckdb")
        filled = time.perf_counter() - t0
        n = pending_equiv(root / "lab.duckdb")
        print(f"app start ({label}), LAB_PUBLISHED of {len(runs)} runs: serving after {serving:.1f} s "
              f"(goal < 60 s); every run's equiv filled {filled:.1f} s after the start"
              f"{'' if n == 0 else ' (equiv state unknown)'}")
        return serving, filled
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--columns", type=int, default=8)
    parser.add_argument("--only", choices=["start", "fetch"], default=None,
                        help="start: only the app start with LAB_PUBLISHED; fetch: everything but it")
    args = parser.parse_args()
    record = Record("bench_published", packages=("gradio", "httpx"))
    record.setting(files=args.files, columns=args.columns, only=args.only)
    from lab.published.fetch import fetch_and_import
    from lab.store.opening import open_store
    from lab.triage import SliceSpec, count_slice, refresh_step_flags, slice_steps

    template = json.loads(SOURCES[0].read_text())
    rows = template["per_step"] + json.loads(SOURCES[1].read_text())["per_step"]
    top = {k: v for k, v in template.items() if k not in ("per_step", "aggregate")}
    catalogue = load_catalogue()
    runs = [r for r in runs_of(catalogue).values() if len(r.files) == 1 and not r.files[0].sha256]
    runs = sorted(runs, key=lambda r: (r.series is None, r.series or "", r.x or 0, r.key))[: args.files]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        steps = scaled_replay(root / "replay.jsonl")
        site = root / "site"
        sizes = []
        for i, run in enumerate(runs):
            f = run.files[0]
            path = site / f.commit / f.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(synthetic_result(rows, top, steps, i)))
            sizes.append(path.stat().st_size)
        server, base = serve(site)
        print(f"{len(runs)} files, {statistics.mean(sizes) / 1e6:.2f} MB each on average, 303 steps each")
        if args.only != "fetch":
            space = root / "space"
            for label in ("cold: empty cache and store", "restart: files cached, store built"):
                serving, filled = app_start(space, base, runs, root / "replay.jsonl", label)
                record.figure(f"public Space with LAB_PUBLISHED of {len(runs)} runs, {label}: start to serving", serving,
                              "s", note="goal < 60 s")
                record.figure(f"… {label}: start to every run's equiv filled", filled, "s")
            if args.only == "start":
                server.shutdown()
                record.write()
                return 0
        results = root / "results"
        results.mkdir()
        for name in CSV_FILES:
            (results / name).write_bytes((REPO / "results" / name).read_bytes())
        settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                            cache_dir=root / "cache", replay_path=str(root / "replay.jsonl"))
        store = open_store(settings)
        t0 = time.perf_counter()
        report = fetch_and_import(store, runs, settings.cache_dir, settings.results_dir, base=base, progress=False)
        total = time.perf_counter() - t0
        assert report.ok, report.summary()
        t0 = time.perf_counter()
        again = fetch_and_import(store, runs, settings.cache_dir, settings.results_dir, base=base, progress=False)
        second = time.perf_counter() - t0
        assert not again.imported and not again.fetch.downloaded
        server.shutdown()
        print(f"fetch (loopback) + check + import, equiv filled at once (the CLI's `data published fetch`): "
              f"{total:.1f} s in all, {1000 * total / len(runs):.0f} ms per file")
        print(f"second run (nothing changes): {1000 * second:.0f} ms in all")
        record.figure(f"fetch (loopback) + check + import of {len(runs)} files of "
                      f"{statistics.mean(sizes) / 1e6:.2f} MB", 1000 * total / len(runs), "ms per file")
        record.figure("a second fetch (nothing changes)", second, "s")
        t0 = time.perf_counter()
        refresh_step_flags(store)
        print(f"triage step flags for {len(runs)} × 303 steps: {time.perf_counter() - t0:.2f} s (once)")
        ids = [r[0] for r in store.rows("SELECT run_id FROM runs WHERE source = 'published' ORDER BY path")]
        spec = SliceSpec.from_dict({"run_ids": ids, "f1_max": 0.2, "buckets": ["late"]})
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            n = count_slice(store, spec)
            page = slice_steps(store, spec, limit=50)
            times.append(time.perf_counter() - t0)
        print(f"triage slice over {len(ids)} runs (F1 ≤ 0.2, late bucket: {n} steps; count + first page of "
              f"{len(page)}): median {1000 * statistics.median(times):.1f} ms")
        record.figure(f"Triage slice over {len(ids)} runs (F1 <= 0.2, late bucket; count + first page)",
                      1000 * statistics.median(times), "ms", note="median of 10")
        store.close()

        from lab.serve import create_context
        from lab.ui.compare.answers import warm_instant_engines
        from lab.ui.compare.handlers import step_outputs

        ctx = create_context(settings, [])
        chosen = ids[: args.columns]
        t0 = time.perf_counter()
        for run_id in chosen:
            ctx.add_stored_run(run_id)
        print(f"adding {len(chosen)} published runs as Compare columns: {time.perf_counter() - t0:.2f} s")
        keys = ctx.step_keys()
        cold = []
        for key in keys[:40]:
            t0 = time.perf_counter()
            step_outputs(ctx, key)
            cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        warm_instant_engines(ctx).join()
        print(f"background precompute of {len(chosen)} columns × {len(keys)} steps: {time.perf_counter() - t0:.1f} s")
        if os.environ.get("BENCH_PROFILE"):
            import cProfile
            import pstats

            cProfile.runctx("for k in keys[:20]: step_outputs(ctx, k)", globals(), locals(), str(root / "prof"))
            pstats.Stats(str(root / "prof")).sort_stats("cumulative").print_stats(25)
        warm = []
        for key in keys:
            t0 = time.perf_counter()
            step_outputs(ctx, key)
            warm.append(time.perf_counter() - t0)
        print(f"Compare switch, {len(chosen)} published columns: before precompute median "
              f"{1000 * statistics.median(cold):.0f} ms (max {1000 * max(cold):.0f}); after: median "
              f"{1000 * statistics.median(warm):.1f} ms (max {1000 * max(warm):.1f}) over {len(keys)} steps")
        record.figure(f"Compare step switch, {len(chosen)} published columns, after the background precompute",
                      1000 * statistics.median(warm), "ms", note=f"median over {len(keys)} steps; max {1000 * max(warm):.0f} ms")
        record.figure(f"Compare step switch, {len(chosen)} published columns, before it", 1000 * statistics.median(cold),
                      "ms", note="median")
        ctx.pool.close_all()
        ctx.store.close()
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
