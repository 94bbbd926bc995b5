"""Statistics at scale on a public lab (issue: one visitor's click held the lab for minutes): ten visitors, each its
own client behind the owner's trusted proxy, pick Results baselines and a checkpoint series at the same time
while a bystander switches Compare steps; every switch answers within a second. One client firing many new
baselines at once gets its share and a one-line refusal for the rest, and the bystander still waits no longer.
The lab is the real `python app.py` (LAB_PUBLIC=1) with 100 stored runs of 303 steps, visitors are real HTTP
clients (Gradio's queue as a browser uses it; gradio_client for the bystander)."""
from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from bench.stats_store import write_runs
from lab.store.opening import open_store
from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT
from tests.public.helpers_relay import relay_from
from tests.public.test_public_round_four import guest
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
RUNS, SERIES, VISITORS, PROXY = 100, 60, 10, "127.0.0.2"
SWITCH_LIMIT_S = 1.0
SETTLE_S = 12  # the store's file is let go 10 s after its last use (lab.store.connection)


@pytest.fixture(scope="module")
def busy_lab(tmp_path_factory):
    """(relay url, direct url, run ids, the events' indices): a public lab with RUNS stored runs (a series of
    SERIES) and two of the excerpt's runs as the owner's Compare columns."""
    root = tmp_path_factory.mktemp("stats-load")
    results = make_results_dir(root)
    write_runs(results / "runs", RUNS, SERIES)
    owners = []
    for i in range(2):
        write_stored_run(results / "held" / f"held{i}.json", f"held{i}", offset=i)
        owners += ["--engine", f"stored:{results / 'held' / f'held{i}.json'}"]
    open_store(results / "lab.duckdb", results).close()  # built and its equiv columns filled: a settled store
    env = lab_env(LAB_PUBLIC="1", LAB_RESULTS=str(results), LAB_TRUSTED_PROXIES=PROXY, LAB_LOG_DIR=str(root / "logs"))
    with app_process(["--results", str(results), "--replay", str(EXCERPT), *owners], root / "app.log", env,
                     timeout=600) as (url, _):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        config = httpx.get(f"{url}config", timeout=60).json()
        # start-up writes (the triage flags) end in a checkpoint when the store's file is let go: a new store
        # generation once; the load starts on the settled one, as a lab that has been up a while
        time.sleep(SETTLE_S)
        with relay_from(PROXY, port) as relay:
            yield relay, url, config
    log = (root / "app.log").read_text(errors="replace")
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]


def component(config: dict, elem_id: str) -> dict:
    return next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == elem_id)


def event(config: dict, elem_id: str, trigger: str) -> tuple[int, int]:
    target = component(config, elem_id)["id"]
    return next(i for i, d in enumerate(config["dependencies"]) if [target, trigger] in d.get("targets", [])), target


def call(url: str, config: dict, elem_id: str, trigger: str, data: list, session: str, client: str) -> dict:
    """An event without an API name, as a browser sends it (queue/join, then the session's event stream), from
    `client` (X-Forwarded-For through the trusted proxy): {"seconds", "success", "logs", "output"}."""
    fn_index, target = event(config, elem_id, trigger)
    headers = {"X-Forwarded-For": client}
    t0 = time.perf_counter()
    joined = httpx.post(f"{url}gradio_api/queue/join", headers=headers, timeout=120,
                        json={"data": data, "fn_index": fn_index, "trigger_id": target, "session_hash": session,
                              "event_data": None})
    assert joined.status_code == 200, joined.text
    logs, done = [], {}
    with httpx.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}, headers=headers,
                      timeout=300) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            if message.get("msg") == "log":
                logs.append(message.get("log", ""))
            if message.get("msg") == "process_completed":
                done = message
                break
    return {"seconds": time.perf_counter() - t0, "success": done.get("success"), "logs": logs,
            "output": done.get("output", {}).get("data")}


def baselines(config: dict) -> list[str]:
    return [value for _, value in component(config, "lab-lb-baseline")["props"]["choices"]]


def pick_baseline(url, config, run_id, session, client) -> dict:
    return call(url, config, "lab-lb-baseline", "change", ["all 116 + lab runs", "", "score", run_id], session, client)


def pick_series(url, config, session, client) -> dict:
    return call(url, config, "lab-series-pick", "input", ["ser", "(no slice)"], session, client)


class Bystander:
    """Switches Compare steps back and forth until stopped; keeps each switch's seconds."""

    def __init__(self, url: str) -> None:
        self.client = guest(url)
        self.key = self.client.predict(None, False, None, api_name="/show_step")[1]["value"]
        self.other = None
        self.seconds: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        keys = [self.key, self.key]
        while not self.stop.is_set():
            t0 = time.perf_counter()
            out = self.client.predict(keys[len(self.seconds) % 2], False, None, api_name="/show_step")
            self.seconds.append(time.perf_counter() - t0)
            keys[1] = out[1]["value"] if self.other is None else self.other
            self.other = keys[1]


def under_load(url: str, work) -> tuple[list[float], list]:
    bystander = Bystander(url)
    for _ in range(3):  # warm: the owner's columns and their run-level block are computed once
        bystander.client.predict(bystander.key, False, None, api_name="/show_step")
    watcher = threading.Thread(target=bystander.run)
    watcher.start()
    try:
        results = work()
    finally:
        bystander.stop.set()
        watcher.join(60)
    return bystander.seconds, results


def test_ten_visitors_pick_baselines_and_series_while_a_bystander_switches_steps(busy_lab):
    relay, url, config = busy_lab
    runs = baselines(config)
    assert len(runs) >= RUNS
    found: dict[int, list[dict]] = {}

    def visitor(i: int) -> None:
        client, session = f"203.0.113.{10 + i}", f"stats-visitor-{i}"
        found[i] = [pick_baseline(relay, config, runs[i], session, client), pick_series(relay, config, session, client),
                    pick_baseline(relay, config, runs[VISITORS + i], session, client)]

    def work():
        threads = [threading.Thread(target=visitor, args=(i,)) for i in range(VISITORS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        return found

    switches, found = under_load(url, work)
    assert len(found) == VISITORS and all(r["success"] for picks in found.values() for r in picks), found
    table = found[0][0]["output"][0]
    assert "P(best)" in table["headers"] and "detectable Δ (80 %)" in table["headers"]
    assert any("P(best)" in json.dumps(picks[1]["output"]) for picks in found.values())  # the series plot's row
    assert switches and max(switches) < SWITCH_LIMIT_S, sorted(switches)[-5:]


def test_one_client_gets_its_share_and_a_one_line_refusal(busy_lab):
    relay, url, config = busy_lab
    runs = baselines(config)[40:56]  # baselines nobody picked yet: each a new computation

    def work():
        out: list[dict] = []
        threads = [threading.Thread(target=lambda r=r, i=i: out.append(
            pick_baseline(relay, config, r, f"one-client-{i}", "198.51.100.7"))) for i, r in enumerate(runs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        return out

    switches, out = under_load(url, work)
    refused = [r for r in out if any("statistics: one visitor may have at most" in line for line in r["logs"])]
    assert refused and len(refused) < len(runs), [r["logs"] for r in out]
    assert all(len(line.splitlines()) == 1 and "Traceback" not in line for r in refused for line in r["logs"])
    assert max(switches) < SWITCH_LIMIT_S, sorted(switches)[-5:]
