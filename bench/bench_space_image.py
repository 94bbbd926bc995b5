"""The Space image, measured: podman builds the Dockerfile on the stand-in base
(../shared/space-image/make_base.sh) with the replay baked in and published runs fetched, both from a
loopback server (the excerpt stands in for the public file), as tests/public/test_space_image.py does.

    python bench/bench_space_image.py [--starts N]

Prints: the build (cold or warm, as podman's cache is), the image's size, a rebuild after a change to lab/
only (a copy of this checkout with one line added to lab/__init__.py: the requirements layer must come from
the cache), the container's start to serving (N starts), and the first page load in Chromium (navigation
to the first step painted in Compare). Every container is removed; the rebuilt copy's image too.
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
from tests.space_image import TAG, build_image, build_server, image_id, image_size, podman, space_container  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
CHANGED_TAG = f"{TAG}-changed"


def checkout_copy(dest: Path) -> Path:
    """This checkout's files (tracked and untracked, not ignored) in `dest`, with lab/ changed by one line."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src, dst = ROOT / name.decode(), dest / name.decode()
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    init = dest / "lab" / "__init__.py"
    init.write_text(init.read_text() + f"\n# bench_space_image: a change to lab/ only ({time.time()})\n")
    return dest


def step_cached(log: str, marker: str) -> bool:
    """Whether the build step whose line contains `marker` came from podman's cache ("--> Using cache")."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("STEP ") and marker in line:
            return any(later.startswith("--> Using cache") for later in lines[i + 1:i + 3])
    return False


def first_page_load(url: str) -> float:
    """Seconds from navigation start to the first step painted in Chromium (its task, turns and screen in
Compare's context panel; timed inside the page). No engine is loaded, so Compare shows no answer columns."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page()
            page.goto(url, wait_until="commit", timeout=600_000)
            page.wait_for_function("() => { const c = document.querySelector('#lab-context');"
                                   " return !!c && c.textContent.includes('task-'); }", timeout=600_000)
            ms = page.evaluate("() => new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0)))")
        finally:
            browser.close()
    return ms / 1000


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=3, help="container starts to time (default 3)")
    parser.add_argument("--no-build", action="store_true", help="time the starts and the page load of the image "
                        "built before (no build)")
    args = parser.parse_args()
    if args.starts < 1:
        parser.error("--starts must be at least 1")
    return args


def builds(record: Record) -> None:
    """Build this checkout (as the test does), then a copy with lab/ changed; print (and record) times and size."""
    with tempfile.TemporaryDirectory(prefix="bench-space-") as tmp, build_server() as base:
        build = build_image(base, Path(tmp) / "build.log")
        print(f"build of this checkout: {build.seconds:.1f} s")
        print(f"image size: {image_size() / 1e9:.2f} GB ({image_size()} bytes)")
        record.figure("build of this checkout", build.seconds, "s")
        record.figure("the image", image_size() / 1e9, "GB")
        context = checkout_copy(Path(tmp) / "context")
        changed = build_image(base, Path(tmp) / "changed.log", tag=CHANGED_TAG, context=context)
        reused = "yes" if step_cached(changed.log, "RUN pip install") else "NO"
        print(f"rebuild after a change to lab/ only: {changed.seconds:.1f} s ({changed.log.count('Using cache')} "
              f"steps from the cache; the requirements' layer from the cache: {reused})")
        record.figure("rebuild after a change to lab/ only", changed.seconds, "s")
        record.check("the requirements' layer comes from the cache on a rebuild", reused == "yes")
        subprocess.run([*podman(), "rmi", image_id(CHANGED_TAG) or CHANGED_TAG], capture_output=True)


def main() -> int:
    args = parse_args()
    record = Record("bench_space_image")
    record.setting(starts=args.starts, build=not args.no_build)
    if not args.no_build:
        builds(record)
    starts, loads = [], []
    for i in range(args.starts):
        with space_container() as container:
            starts.append(container.start_s)
            print(f"start {i + 1}: {container.start_s:.1f} s to serving", flush=True)
            if i == 0:
                loads.append(first_page_load(container.url))
                print(f"first page load: {loads[0]:.2f} s", flush=True)
    print(f"start to serving: median {statistics.median(starts):.1f} s (min {min(starts):.1f}, max {max(starts):.1f}, "
          f"{len(starts)} starts)")
    print(f"first page load in Chromium (navigation to the first step painted): {loads[0]:.2f} s")
    record.figure("container start to serving", statistics.median(starts), "s",
                  note=f"median of {len(starts)} starts, {min(starts):.1f} to {max(starts):.1f} s")
    record.figure("first page load in Chromium (navigation to the first step painted)", loads[0], "s")
    record.write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
