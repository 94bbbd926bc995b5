"""The documentation's pictures, taken from the real app: docs/images/*.png.

    python scripts/screenshots.py [--out docs/images] [--only compare.png …]

Builds a tiny random-weight model (the tests' own), makes stored runs with the lab's own replay on the
replay excerpt beside this checkout (`reference`, a published run of ../shared/tb2lite/published/ replayed
as a `stored:` engine, and the tiny model), starts `python app.py` on the excerpt with those runs, the
`reference` engine and the tiny model as a live engine, and drives Chromium (Playwright, /usr/bin/chromium)
through the tabs. Each picture is reduced to a palette PNG well under MAX_BYTES. Nothing is downloaded.

`SHOTS` names every picture this script makes; tests/house/test_docs.py reads it (without running anything)
and fails when a page shows a picture that is not in it.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# picture -> what it shows (the pages' alt texts say the same)
SHOTS = {
    "compare.png": "Compare: the reference, a stored run and a tiny live engine answering one step",
    "whatif.png": "Compare's what-if panel: an edited terminal screen re-run on the engines",
    "engines.png": "Engines: the loaded engines with their state, device and memory",
    "batch.png": "Batch: a replay of the excerpt on two engines, finished",
    "results.png": "Results: the published leaderboard with the stored runs, and a plot",
    "triage.png": "Triage: a slice of the steps where one run fails",
}
MAX_BYTES = 400_000
EXCERPT = ROOT.parent / "shared" / "tb2lite" / "replay_excerpt.jsonl"
PUBLISHED = ROOT.parent / "shared" / "tb2lite" / "published" / "llada21_flash_transformers_sample10_suffix_len256.json"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
VIEWPORT = {"width": 1440, "height": 960}
# every row of the Batch table (both engines, and the overall line) shows steps done == steps selected
BATCH_DONE = """() => {
  const rows = [...document.querySelectorAll('#lab-batch-live [data-field=steps]')].map(e => e.textContent.split('/'));
  return rows.length >= 2 && rows.every(([done, total]) => done === total && Number(total) > 0);
}"""
TINY = "tiny-qwen2"
TINY_STEPS = 3


def lab_env(root: Path) -> dict[str, str]:
    """The lab's processes keep everything under `root`, offline."""
    env = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", "LAB_PUBLIC", "LAB_ALLOW_ENGINES")}
    env.update(LAB_RESULTS=str(root / "results"), LAB_CACHE_DIR=str(root / "cache"), HF_HUB_OFFLINE="1",
               GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    return env


def tiny_spec(model: Path) -> str:
    return f"transformers:{model}?device=cpu&max_tokens=32&batch_size=1&name={TINY}"


def make_runs(root: Path, model: Path) -> None:
    """The stored runs, written and imported by the lab's own `python -m lab replay`."""
    results = root / "results"
    results.mkdir(parents=True)
    for table in (ROOT / "results").glob("*.csv"):
        shutil.copy(table, results / table.name)
    # the tiny model answers the first steps only: its tiny vocabulary spells the later prompts in more tokens
    # than its context holds (and their attention would take gigabytes)
    for spec, limit in (("reference", []), (f"stored:{PUBLISHED}?name=llada21-flash", []),
                        (tiny_spec(model), ["--limit", str(TINY_STEPS)])):
        done = subprocess.run([sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine", spec,
                               "--out", str(results / "runs"), *limit], cwd=ROOT, env=lab_env(root),
                              capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            sys.exit(f"screenshots: python -m lab replay --engine {spec} failed:\n{done.stderr[-2000:]}")


def run_ids(root: Path) -> dict[str, str]:
    """file stem -> run id of the runs in the store (reference, llada21-flash, tiny-qwen2)."""
    done = subprocess.run([sys.executable, "-m", "lab", "results", "sql", "SELECT path, run_id FROM runs"],
                          cwd=ROOT, env=lab_env(root), capture_output=True, text=True, timeout=600, check=True)
    return {Path(row["path"]).stem: row["run_id"] for row in csv.DictReader(io.StringIO(done.stdout))}


def shrink(png: bytes, path: Path) -> None:
    """Save `png` as a palette PNG (a screenshot has few colours), refusing one past MAX_BYTES."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    if buffer.tell() > MAX_BYTES:
        sys.exit(f"screenshots: {path.name} is {buffer.tell():,} bytes (limit {MAX_BYTES:,}); take a smaller part")
    path.write_bytes(buffer.getvalue())
    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: {buffer.tell():,} bytes")


def take(page, name: str, out: Path, wanted: set[str], full_page: bool = False) -> None:
    """The page as shown (or the whole page) into OUT/NAME, when NAME is wanted."""
    if name in wanted:
        shrink(page.screenshot(full_page=full_page), out / name)


def compare_and_whatif(page, out: Path, wanted: set[str]) -> None:
    """Compare on task-000/2 after *Generate on all engines*; then the what-if panel on the same step."""
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Compare").click()
    columns = page.locator("#lab-columns")
    expect(columns.locator('.lab-col[data-engine="reference"]')).to_be_visible()
    page.locator("body").click(position={"x": 5, "y": 5})
    for _ in range(2):  # task-000/2: a step the published run answered
        page.keyboard.press("j")
        page.wait_for_timeout(500)
    expect(page.locator("#lab-context")).to_contain_text("step: 2 (turn")
    page.locator("#lab-generate").click()
    tiny = columns.locator('.lab-col[data-engine^="transformers:"]')
    expect(tiny.locator('[data-metric="F1"] b')).to_be_visible(timeout=900_000)
    page.wait_for_timeout(1500)  # the heatmap and the F1 bars follow in their own events
    columns.scroll_into_view_if_needed()
    take(page, "compare.png", out, wanted)

    if "whatif.png" in wanted:
        page.get_by_text("What-if: edit this step's context and re-run it").click()
        text = page.locator("#lab-whatif-text textarea")
        text.fill(text.input_value() + "root@box:/app# ls\nmain.py  README.md  tests\n")
        page.get_by_role("button", name="Re-run edited step on all engines").click()
        result = page.locator("#lab-whatif-out .lab-whatif-engine:not([data-state=running])")
        expect(result).to_have_count(3)
        panel = page.locator("#lab-whatif-out")
        panel.scroll_into_view_if_needed()
        take(page, "whatif.png", out, wanted)


def drive(url: str, ids: dict[str, str], out: Path, wanted: set[str]) -> None:
    from playwright.sync_api import expect, sync_playwright

    from lab.triage import SliceSpec

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(300_000)
        expect.set_options(timeout=300_000)  # a loaded machine: the app's events can take long
        page.goto(url)
        page.get_by_role("tab", name="Engines").click()  # every engine loaded first: the live one takes a while
        expect(page.locator("#lab-engine-table tr", has_text=TINY)).to_contain_text("ready")
        page.wait_for_timeout(500)
        take(page, "engines.png", out, wanted)

        if wanted & {"compare.png", "whatif.png"}:
            compare_and_whatif(page, out, wanted)

        if "batch.png" in wanted:
            page.get_by_role("tab", name="Batch").click()
            engines = page.locator("#lab-batch-engines")
            for label in ("reference", TINY):
                engines.get_by_label(label, exact=True).check()
            page.get_by_label("early", exact=True).check()  # the first two steps of each task: short prompts
            page.locator("#lab-batch-new-run input").check()
            page.locator("#lab-batch-run").click()
            page.wait_for_function(BATCH_DONE, timeout=900_000)
            page.wait_for_timeout(500)
            take(page, "batch.png", out, wanted)

        page.get_by_role("tab", name="Results").click()
        expect(page.locator("#lab-results-plot .js-plotly-plot")).to_be_visible()
        page.get_by_label("all 116 + lab runs").check()
        page.wait_for_timeout(1500)
        take(page, "results.png", out, wanted, full_page=True)  # the table and the plot below it

        if "triage.png" in wanted:
            spec = SliceSpec.from_dict({"run_ids": [ids["llada21-flash"], ids["reference"]], "f1_max": 0.5})
            page.goto(f"{url}?{spec.to_query()}")
            page.get_by_role("tab", name="Triage").click()
            expect(page.locator("#triage-summary")).to_contain_text("steps")
            page.wait_for_timeout(1500)
            take(page, "triage.png", out, wanted, full_page=True)  # the filters and the slice's table below them
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--only", nargs="+", choices=sorted(SHOTS), help="only these pictures")
    args = parser.parse_args(argv)
    for need, what in ((EXCERPT, "the replay excerpt"), (PUBLISHED, "the published run"), (Path(CHROMIUM), "Chromium")):
        if not need.exists():
            sys.exit(f"screenshots: {what} is missing at {need}")
    args.out.mkdir(parents=True, exist_ok=True)
    from tests.conftest import save_tiny_model
    from tests.helpers_app import app_process

    with tempfile.TemporaryDirectory(prefix="lab-screenshots-") as name:
        root = Path(name)
        model = save_tiny_model(root / "tiny", hidden=32, heads=4, kv_heads=2, positions=32768)
        make_runs(root, model)
        ids = run_ids(root)
        engines = ["--engine", "reference", "--engine", f"stored:{root / 'results' / 'runs' / 'llada21-flash.json'}",
                   "--engine", tiny_spec(model)]
        with app_process(["--replay", str(EXCERPT), "--results", str(root / "results"), *engines], root / "app.log",
                         env=lab_env(root), timeout=600) as (url, _):
            drive(url, ids, args.out, set(args.only or SHOTS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
