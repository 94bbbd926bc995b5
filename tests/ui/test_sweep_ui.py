"""The Batch tab submits a sweep to a real two-node Ray cluster (ray.cluster_utils.Cluster, dashboard off)
through Gradio's HTTP API: progress rows update and reach done, the files equal `python -m lab replay`'s,
the runs land in the store, Stop mid-sweep keeps every finished step and resume continues; a missing
cluster or a missing Ray is one line. The app process is the sweep's driver. Beside the sweep, the race
(`/run_race`) of a synthetic series of stored checkpoints shows its table live and ends with the leader."""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from lab.settings import Settings
from lab.ui.batch.rows import ANSWERS, REFERENCE
from tests.helpers_servers import free_port, serve_lab
from tests.paths import EXCERPT
from tests.helpers_runs import untimed_steps
from tests.helpers_store import make_results_dir
from tests.sweep.test_sweep_ray import lab, ray_cluster, servers_of
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
STORE = 80 * 1024 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head that runs nothing and one worker node (3 CPUs: three engines at once); the nodes' workers
    inherit this environment (their servers' logs go to the test's folder)."""
    logs = tmp_path_factory.mktemp("sweep-ui-logs")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LAB_LOG_DIR", str(logs))
        env.setenv("HF_HUB_OFFLINE", "1")
        env.setenv("TOKENIZERS_PARALLELISM", "false")
        with ray_cluster({"num_cpus": 3, "object_store_memory": STORE}) as made:
            yield made


@pytest.fixture(scope="module")
def served(cluster, tmp_path_factory):
    """The lab (reference + a stored run of its own runs folder) with LAB_RAY_ADDRESS at the cluster."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("sweep-ui")
    results = make_results_dir(root)
    write_stored_run(results / "runs" / "altered.json", "altered")
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT), ray_address=cluster.address)
    ctx = create_context(settings, ["reference", f"stored:{results / 'runs' / 'altered.json'}"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx, root
    ctx.pool.close_all()


def rows_of(html: str) -> dict[str, dict[str, str]]:
    """Engine -> its table cells (steps, state, node) from the live table's HTML."""
    out = {}
    for name, body in re.findall(r'<tr data-engine="([^"]*)"[^>]*>(.*?)</tr>', html, flags=re.S):
        cells = dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', body))
        out[name or "overall"] = cells
    return out


def sweep_args(names, *, specs="", tasks=(), buckets=(), shards=1, samples=1, resume=True, fresh=False, name="",
               what=ANSWERS):
    return [list(names), specs, list(tasks), list(buckets), [], shards, samples, resume, fresh, name, what]


def per_step(path: Path) -> list[dict]:
    return untimed_steps(json.loads(path.read_text())["per_step"])


def test_batch_tab_sweep_with_shards_reaches_done_equals_replay_and_lands_in_the_store(served, tmp_path):
    from gradio_client import Client

    url, ctx, root = served
    client = Client(url, verbose=False)
    task = ctx.replay.tasks[0]
    n = len(ctx.replay.steps_for_task(task))
    t0 = time.perf_counter()
    job = client.submit(*sweep_args(["reference", "altered"], tasks=[task], shards=2), api_name="/run_sweep")
    final = job.result(timeout=300)
    took = time.perf_counter() - t0
    shown = [o for o in job.outputs()]
    rows = rows_of(final)
    assert "dashboard off" in final and "2 nodes" in final, final[:500]
    assert set(rows) == {"reference", "altered-replay", "overall"}  # never the stored engine's own input file
    for name in ("reference", "altered-replay"):
        assert rows[name]["steps"] == f"{n}/{n}" and rows[name]["state"].startswith(f"done · saved {name}.json")
        assert re.match(r"\S+ · [0-9a-f]{8}$", rows[name]["node"]), rows[name]  # the node it ran on
    assert rows["overall"]["steps"] == f"{2 * n}/{2 * n}"
    assert any("connecting to the Ray cluster" in o for o in shown)
    assert any(r.get("state", "").startswith(("waiting", "loading", "running")) for o in shown
               for r in rows_of(o).values()), "no live row before done"
    print(f"\nsweep of 2 prompt-free engines x 2 shards x {n} steps through /run_sweep: {took:.1f} s")

    runs = Path(ctx.settings.runs_dir)
    lab(["replay", "--replay", str(EXCERPT), "--tasks", task, "--chunk-size", "8", "--out", str(tmp_path / "single"),
         "--engine", "reference", "--engine", f"stored:{runs / 'altered.json'}"], tmp_path)
    assert per_step(runs / "reference.json") == per_step(tmp_path / "single" / "reference.json")
    assert per_step(runs / "altered-replay.json") == per_step(tmp_path / "single" / "altered.json")
    for name in ("reference", "altered-replay"):
        one, two = (json.loads(p.read_text())["aggregate"] for p in (runs / f"{name}.json",
                                                                     tmp_path / "single" / f"{name.split('-')[0]}.json"))
        assert one == two
        run_id = re.search(rf'data-engine="{name}".*?· run ([^<\s]+)<', final, flags=re.S).group(1)
        stored = ctx.query("SELECT steps FROM runs WHERE run_id = ?", [run_id])
        assert len(stored) == 1 and int(stored.iloc[0]["steps"]) == n
    assert not list(runs.glob("*.partial.jsonl"))
    shards = [json.loads((runs / f"reference-shard{i:02d}.json").read_text()) for i in range(2)]
    assert [(s["num_shards"], s["shard_index"], s["total_input_steps"]) for s in shards] == [(2, 0, n), (2, 1, n)]

    again = client.predict(*sweep_args(["reference"], tasks=[task]), api_name="/run_sweep")
    assert "already complete: reference.json" in again and "nothing to run on the cluster" in again


def test_batch_tab_sweeps_the_reference_likelihood_like_score_reference(served, tiny_model_dir, tmp_path):
    """Run: reference likelihood, on the cluster: two shards of an in-process transformers engine (typed into
    the SPEC box) give `python -m lab score-reference`'s file, its row shows the NLL per token, and it lands
    in the store's reference runs; samples above 1 are refused in one line. The first task's early steps
    (its two shortest prompts: the later ones cost the tiny model seconds each, twice)."""
    from gradio_client import Client

    url, ctx, _ = served
    client = Client(url, verbose=False)
    task = ctx.replay.tasks[0]
    n = len([s for s in ctx.replay.steps_for_task(task) if s.bucket == "early"])
    spec = f"transformers:{tiny_model_dir}?device=cpu&name=tfref"
    final = client.predict(*sweep_args([], specs=spec, tasks=[task], buckets=["early"], shards=2, what=REFERENCE),
                           api_name="/run_sweep")
    assert rows_of(final)["tfref"]["state"].startswith("done · saved tfref.reference.json"), final
    lab(["score-reference", "--replay", str(EXCERPT), "--tasks", task, "--limit", str(n), "--out", str(tmp_path),
         "--engine", spec], tmp_path)  # a task's early steps are its first
    runs = Path(ctx.settings.runs_dir)
    swept, local = (json.loads(p.read_text()) for p in (runs / "tfref.reference.json", tmp_path / "tfref.reference.json"))
    assert swept["per_step"] == local["per_step"] and swept["aggregate"] == local["aggregate"]
    nll, scored = local["aggregate"]["ref_nll_per_token"], local["aggregate"]["steps_scored"]
    assert 0 < scored <= n and len(local["per_step"]) == n == 2
    assert f"reference NLL/token {nll:.4f} ({scored} steps scored)" in final, final[-2000:]
    run_id = re.search(r'data-engine="tfref".*?· run ([^<\s]+)<', final, flags=re.S).group(1)
    stored = ctx.query("SELECT steps_scored, ref_nll_per_token FROM reference_runs WHERE ref_run_id = ?", [run_id])
    assert stored.values.tolist() == [[scored, pytest.approx(nll, abs=1e-6)]]
    assert not list(runs.glob("tfref*.partial.jsonl"))

    refused = client.predict(*sweep_args([], specs=spec, tasks=[task], samples=2, fresh=True, what=REFERENCE),
                             api_name="/run_sweep")
    assert "scored once per step" in refused and "set samples to 1" in refused


def test_stop_mid_sweep_keeps_finished_steps_and_resume_continues(served, tiny_model_dir, monkeypatch):
    from gradio_client import Client

    import lab.ui.batch.sweep_panel as panel

    url, ctx, root = served
    monkeypatch.setattr(panel, "CHUNK", 1)  # every step comes back on its own: Stop lands between steps
    client = Client(url, verbose=False)
    # typed into the SPEC box; 400 tokens a step: the first step ends about 2.4 s before the last on a quiet machine
    # (at 24 tokens, 0.8 s: on a loaded machine all four could finish before Stop reached the sweep)
    spec = f"transformers-serve:{tiny_model_dir}?device=cpu&max_tokens=400&name=ts"
    early = [s.key for s in ctx.replay.steps if s.bucket == "early"]
    checkpoint = Path(ctx.settings.runs_dir) / "ts.partial.jsonl"
    job = client.submit(*sweep_args([], specs=spec, buckets=["early"]), api_name="/run_sweep")
    deadline = time.time() + 240
    while not (checkpoint.is_file() and checkpoint.read_text().count('"row"') >= 1):
        assert time.time() < deadline and not job.done(), "no step came back to the app"
        time.sleep(0.1)
    seen_live = [o for o in job.outputs() if rows_of(o).get("ts", {}).get("state") == "running"]
    t_stop = time.perf_counter()
    client.predict(api_name="/stop_batch")
    final = job.result(timeout=120)
    stopped_in = time.perf_counter() - t_stop
    row = rows_of(final)["ts"]
    assert row["state"].startswith("stopped") and "resume" in row["state"], final
    kept = [json.loads(line)["row"] for line in checkpoint.read_text().splitlines()[1:]]
    assert 1 <= len(kept) < len(early) and row["steps"] == f"{len(kept)}/{len(early)}"
    assert not (Path(ctx.settings.runs_dir) / "ts.json").exists()
    assert seen_live, "the table showed the engine running before Stop"
    deadline = time.time() + 30
    while servers_of(tiny_model_dir) and time.time() < deadline:
        time.sleep(0.5)
    assert not servers_of(tiny_model_dir), "a stopped sweep left its model server running"
    print(f"\nStop pressed -> sweep ended in {stopped_in:.2f} s with {len(kept)}/{len(early)} steps kept")

    job = client.submit(*sweep_args([], specs=spec, buckets=["early"]), api_name="/run_sweep")
    final = job.result(timeout=300)
    assert rows_of(final)["ts"]["state"].startswith("done · saved ts.json"), final
    counts = [int(r["steps"].split("/")[0]) for o in job.outputs() for name, r in rows_of(o).items() if name == "ts"]
    assert min(c for c in counts if c) >= len(kept), counts  # resumed from the kept steps, not from zero
    rows = json.loads((Path(ctx.settings.runs_dir) / "ts.json").read_text())["per_step"]
    assert [f"{r['task_id']}/{r['step_idx']}" for r in rows] == early
    # the kept steps themselves, timings included: not generated again (steps run side by side, so
    # the checkpoint holds them in the order they finished; the saved run is in replay order)
    by_key = {f"{r['task_id']}/{r['step_idx']}": r for r in rows}
    assert [by_key[f"{r['task_id']}/{r['step_idx']}"] for r in kept] == kept
    assert not checkpoint.exists()


def test_unreachable_cluster_and_missing_ray_are_one_line(served, monkeypatch):
    from lab.ui.batch.sweep_panel import plan_sweep, render_view, sweep_updates

    _, ctx, _ = served
    choice = plan_sweep(ctx, ["reference"], "", [ctx.replay.tasks[1]], [], [], 1, 1, True, "nowhere")
    monkeypatch.setattr(ctx.settings, "ray_address", f"127.0.0.1:{free_port()}")
    t0 = time.perf_counter()
    views = list(sweep_updates(ctx, choice, True, threading.Event()))
    assert time.perf_counter() - t0 < 10
    error = views[-1].error
    assert error.startswith("cannot reach the Ray cluster at 127.0.0.1:") and "\n" not in error
    assert rows_of(render_view(views[-1]))["nowhere"]["state"] == "not started"

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as where it is not installed
    views = list(sweep_updates(ctx, choice, True, threading.Event()))
    assert views[-1].error == "Ray is not installed in the lab's environment: pip install -r requirements-ray.txt"

    for bad, why in ((dict(shards=0), "shards"), (dict(samples="many"), "samples"), (dict(specs="nokind:x"), "nokind")):
        args = dict(names=["reference"], patterns="", task_sel=[], bucket_sel=[], group_sel=[], shards=1, samples=1,
                    fresh=False, run_name="")
        args.update({"patterns" if k == "specs" else k: v for k, v in bad.items()})
        with pytest.raises(Exception) as err:
            plan_sweep(ctx, **args)
        assert why in str(err.value) and "\n" not in str(err.value)


@contextmanager
def batch_page(url: str):
    """Chromium on the lab's Batch tab (skipped where Debian's chromium is missing)."""
    from playwright.sync_api import sync_playwright

    from tests.browser.test_browser_compare import ARGS, CHROMIUM

    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1100})
            page.goto(url)
            page.get_by_role("tab", name="Batch").click()
            yield page
        finally:
            browser.close()


def test_chromium_clicks_run_on_the_cluster_and_sees_done(served, tmp_path):
    """In a real browser: tick an engine, name the run, click the cluster button; the table reaches done
    with the node, the overall line and the dashboard line."""
    from playwright.sync_api import expect

    from tests.browser.test_browser_compare import shot_dir

    url, ctx, _ = served
    with batch_page(url) as page:
        expect(page.locator("#lab-sweep-run")).to_be_visible()
        page.locator("#lab-batch-engines").get_by_label("reference", exact=True).check()
        page.get_by_label("run name (optional; one engine only; default: engine name)").fill("browser-ref")
        page.locator("#lab-sweep-run").click()
        live = page.locator("#lab-batch-live")
        n = len(ctx.replay.steps)
        # the sweep's task starts on a Ray worker (a fresh process importing the lab): on the shared 2-core CI
        # machine, busy with the suite's other worker, its row once took over the suite's 30 s to appear
        expect(live.locator('tr[data-engine="browser-ref"] [data-field="state"]')).to_contain_text(
            "done · saved browser-ref.json", timeout=120_000)
        expect(live.locator('tr[data-engine="browser-ref"] [data-field="steps"]')).to_have_text(f"{n}/{n}")
        expect(live.locator('tr[data-engine=""] [data-field="steps"]')).to_have_text(f"{n}/{n}")  # overall
        expect(live.locator('[data-field="dashboard"]')).to_have_text("dashboard off")
        expect(live.locator('tr[data-engine="browser-ref"] [data-field="node"]')).to_contain_text(" · ")
        page.screenshot(path=str(shot_dir(tmp_path) / "batch-sweep.png"), full_page=True)
    assert (Path(ctx.settings.runs_dir) / "browser-ref.json").is_file()


@pytest.fixture(scope="module")
def served_race(cluster, tmp_path_factory):
    """A lab on a synthetic 24-task replay with LAB_RAY_ADDRESS at the cluster, and three stored checkpoints
    (typed into the SPEC box): one right on about 90 % of the steps, two on 30 and 40 %."""
    from lab.serve import create_context
    from tests.sweep.race_series import write_checkpoint, write_replay

    root = tmp_path_factory.mktemp("race-ui")
    replay = write_replay(root / "replay.jsonl", 24)
    specs = [f"stored:{write_checkpoint(root / f'{n}.json', replay, r)}" for n, r in (("good", 0.9), ("bad1", 0.3),
                                                                                     ("bad2", 0.4))]
    results = make_results_dir(root)
    settings = Settings(results_dir=results, runs_dir=results / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(replay), ray_address=cluster.address)
    ctx = create_context(settings, ["reference"])
    ctx.pool.wait()
    with serve_lab(ctx) as (_, url):
        yield url, ctx, specs
    ctx.pool.close_all()


def race_args(specs, *, round_tasks=4, budget=None, samples=1, fresh=False):
    return [[], "\n".join(specs), [], [], [], samples, True, fresh, round_tasks, budget]


def standings_of(html: str) -> dict[str, dict[str, str]]:
    """Checkpoint -> its race-table cells."""
    return {name: dict(re.findall(r'data-field="(\w+)"[^>]*>([^<]*)<', body))
            for name, body in re.findall(r'<tr data-checkpoint="([^"]*)"[^>]*>(.*?)</tr>', html, flags=re.S)}


def test_batch_tab_races_a_series_with_the_table_live_and_keeps_each_checkpoint(served_race):
    """/run_race: the race table after every round while it runs, the worse two eliminated at the first look
    (round 3 of 6, 12 tasks), the leader a finalist; race.json and the partial runs in the lab's runs folder;
    a bad choice is one line before anything runs."""
    from gradio_client import Client

    url, ctx, specs = served_race
    client = Client(url, verbose=False)
    job = client.submit(*race_args(specs), api_name="/run_race")
    final = job.result(timeout=300)
    shown = job.outputs()
    table = standings_of(final)
    assert set(table) == {"good", "bad1", "bad2"}, final[-3000:]
    assert table["good"]["status"] == "finalist (leader)" and table["good"]["p_best"] == "1.00"
    assert table["bad1"]["status"] == table["bad2"]["status"] == "eliminated in round 3"
    assert table["bad1"]["delta"].startswith("-") and table["bad1"]["ci"].startswith("[-")
    assert "race ended: one checkpoint left" in final
    live = [o for o in shown if 'data-field="round"' in o and "race ended" not in o]
    assert any("round 1/6" in o for o in live) and any("round 2/6" in o for o in live), "no table before the end"
    assert rows_of(final)["good"]["steps"] == "84/84"  # the sweep table: steps given so far
    runs = Path(ctx.settings.runs_dir)
    report = json.loads((runs / "race.json").read_text())
    assert [c["status"] for c in report["checkpoints"]] == ["finalist", "eliminated", "eliminated"]
    assert sorted(p.name for p in runs.glob("*.partial.jsonl")) == ["bad1.partial.jsonl", "bad2.partial.jsonl",
                                                                     "good.partial.jsonl"]

    for args, words in ((race_args(specs[:1]), "at least two checkpoints"),
                        (race_args(specs, round_tasks=5000), "tasks per round: give a whole number from 1 to 1000"),
                        (race_args(specs, budget=10, fresh=True), "the first round alone")):
        refused = client.predict(*args, api_name="/run_race")
        assert words in refused and "Traceback" not in refused, refused[-2000:]


def test_chromium_races_the_typed_series_and_sees_the_table(served_race, tmp_path):
    """In a real browser: type the checkpoints' SPECs, tick 'start a new run', set 4 tasks a round, click the
    race button; the race table shows the leader a finalist and the others eliminated."""
    from playwright.sync_api import expect

    from tests.browser.test_browser_compare import shot_dir

    url, _, specs = served_race
    with batch_page(url) as page:
        expect(page.locator("#lab-race-run")).to_be_visible()
        page.locator("#lab-sweep-specs textarea").fill("\n".join(specs))
        page.locator("#lab-batch-new-run input").check()
        page.locator("#lab-race-round-tasks input").fill("4")
        page.locator("#lab-race-run").click()
        live = page.locator("#lab-batch-live")
        expect(live.locator('[data-field="ended"]')).to_contain_text("one checkpoint left", timeout=180_000)
        expect(live.locator('tr[data-checkpoint^="good"] [data-field="status"]')).to_have_text("finalist (leader)")
        expect(live.locator('tr[data-checkpoint^="bad1"] [data-field="status"]')).to_have_text("eliminated in round 3")
        page.screenshot(path=str(shot_dir(tmp_path) / "batch-race.png"), full_page=True)
