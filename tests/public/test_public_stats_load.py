"""Statistics at scale on a public lab (issue: one visitor's click held the lab for minutes): ten visitors, each its
own client behind the owner's trusted proxy, pick Results baselines and a checkpoint series at the same time
while a bystander switches Compare steps; no switch waits a second longer than its switches with nobody else
there. One client firing many new
baselines at once gets its share and a one-line refusal for the rest, and the bystander still waits no longer.
The lab is the real `python app.py` (LAB_PUBLIC=1) with 100 stored runs of 303 steps, visitors are real HTTP
clients (Gradio's queue as a browser uses it; gradio_client for the bystander)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from bench.stats_store import write_runs
from lab.settings import Settings
from lab.store.opening import open_store
from tests.helpers_app import app_process, lab_env
from tests.helpers_store import make_results_dir
from tests.paths import EXCERPT, REPO
from tests.public.helpers_relay import relay_from
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]
RUNS, SERIES, VISITORS, PROXY = 100, 60, 10, "127.0.0.2"
SWITCH_LIMIT_S = 1.0  # what the visitors' statistics may add to a step switch
IDLE = 8
PER_MINUTE = 6  # LAB_CLIENT_STATS_PER_MIN of this lab
SETTLE_S = 3


def settled(db: Path, timeout: float = 180) -> None:
    """Wait until the store's file is checkpointed (no WAL) and unchanged for SETTLE_S: start-up writes (the
    triage flags) end in a checkpoint when the file is let go, a new store generation once; the load starts on
    the settled one, as on a lab that has been up a while."""
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        wal = db.with_name(db.name + ".wal")
        now = (db.stat().st_mtime_ns, wal.exists())
        if now != last:
            last, since = now, time.monotonic()
        elif not now[1] and time.monotonic() - since >= SETTLE_S:
            return
        time.sleep(0.5)
    raise AssertionError(f"{db} never settled")


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
    # built, its equiv columns filled with the replay the app is given: nothing left to fill at start
    open_store(Settings(results_dir=results, db_path=results / "lab.duckdb", replay_path=str(EXCERPT))).close()
    env = lab_env(LAB_PUBLIC="1", LAB_CLIENT_STATS_PER_MIN=str(PER_MINUTE), LAB_RESULTS=str(results),
                  LAB_TRUSTED_PROXIES=PROXY, LAB_LOG_DIR=str(root / "logs"))
    with app_process(["--results", str(results), "--replay", str(EXCERPT), *owners], root / "app.log", env,
                     timeout=600) as (url, _):
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        config = httpx.get(f"{url}config", timeout=60).json()
        settled(results / "lab.duckdb")
        with relay_from(PROXY, port) as relay:
            yield relay, url, config
    log = (root / "app.log").read_text(errors="replace")
    assert log.count("Traceback") == log.count("gradio.exceptions.Error: "), log[-3000:]


def component(config: dict, elem_id: str) -> dict:
    return next(c for c in config["components"] if (c.get("props") or {}).get("elem_id") == elem_id)


def event(config: dict, elem_id: str, trigger: str) -> tuple[int, int]:
    target = component(config, elem_id)["id"]
    return next(i for i, d in enumerate(config["dependencies"]) if [target, trigger] in d.get("targets", [])), target


JOINED = threading.Semaphore(0)  # released once per visitor request queued by the lab


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
    JOINED.release()
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


def drain() -> None:
    """Forget the requests queued before the load."""
    while JOINED.acquire(blocking=False):
        pass


def baselines(config: dict) -> list[str]:
    return [value for _, value in component(config, "lab-lb-baseline")["props"]["choices"]]


def pick_baseline(url, config, run_id, session, client) -> dict:
    """A visitor picks a baseline with the name filter on the series' first ten checkpoints: every row is
    compared (the filter narrows what is shown, after), while the table sent back stays small (the relay and the
    visitors here share this machine with the lab: a real visitor's browser does not)."""
    return call(url, config, "lab-lb-baseline", "change", ["all 116 + lab runs", "ser-checkpoint-1", "score", run_id],
                session, client)


def pick_series(url, config, session, client) -> dict:
    return call(url, config, "lab-series-pick", "input", ["ser", "(no slice)"], session, client)


BYSTANDER = """
import json, sys, time
from gradio_client import Client
client = Client(sys.argv[1], verbose=False, httpx_kwargs={"timeout": 90})
keys = [client.predict(None, False, None, api_name="/show_step")[1]["value"]]
keys.append(client.predict(keys[0], False, None, api_name="/show_step")[1]["value"])
for _ in range(3):  # warm: the owner's columns and their run-level block are computed once
    client.predict(keys[0], False, None, api_name="/show_step")
print("ready", flush=True)
seconds = []
while sys.stdin.readline().strip() != "stop":
    t0 = time.perf_counter()
    client.predict(keys[len(seconds) % 2], False, None, api_name="/show_step")
    seconds.append(time.perf_counter() - t0)
    print(json.dumps(seconds[-1]), flush=True)
"""


def under_load(url: str, work, requests: int) -> tuple[list[float], object]:
    """Run `work()` while a bystander (its own process, as another visitor's browser is) switches Compare steps
    one after another, from the moment the lab has queued the first `requests` of the visitors' requests (their
    connections made: on this machine the visitors, the relay and the lab share two cores) to the end; returns
    the seconds each switch waited beyond the bystander's own switches with nobody else there (the slowest of IDLE
    switches just before: a machine busy with other work makes every request slower and jittery, visitors or
    not) and what `work` returned."""
    bystander = subprocess.Popen([sys.executable, "-c", BYSTANDER, url], cwd=REPO, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, env=lab_env())
    try:
        assert bystander.stdout.readline().strip() == "ready"
        done, seconds = threading.Event(), []
        idle = []
        for _ in range(IDLE):
            bystander.stdin.write("go\n")
            bystander.stdin.flush()
            idle.append(float(bystander.stdout.readline()))

        def switch() -> None:
            while not done.is_set():
                bystander.stdin.write("go\n")
                bystander.stdin.flush()
                seconds.append(float(bystander.stdout.readline()))

        watcher = threading.Thread(target=switch)
        watcher.start()
        try:
            results = work()
        finally:
            done.set()
            watcher.join(120)
        bystander.stdin.write("stop\n")
        bystander.stdin.flush()
        bystander.wait(60)
    finally:
        if bystander.poll() is None:
            bystander.kill()
    alone = max(idle)
    return [t - alone for t in seconds], results


def test_ten_visitors_pick_baselines_and_series_while_a_bystander_switches_steps(busy_lab):
    relay, url, config = busy_lab
    runs = baselines(config)
    assert len(runs) >= RUNS
    found: dict[int, list[dict]] = {}
    for i in range(VISITORS):  # each visitor has the page open: its session and the Results table are there
        assert pick_baseline(relay, config, None, f"stats-visitor-{i}", f"203.0.113.{10 + i}")["success"]
    drain()

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

    switches, found = under_load(url, work, VISITORS)
    assert len(found) == VISITORS and all(r["success"] for picks in found.values() for r in picks), found
    table = found[0][0]["output"][0]
    assert "P(best)" in table["headers"] and "detectable Δ (80 %)" in table["headers"]
    assert any("P(best)" in json.dumps(picks[1]["output"]) for picks in found.values())  # the series plot's row
    assert switches and max(switches) < SWITCH_LIMIT_S, sorted(switches)[-5:]


def in_threads(calls: list) -> list:
    """Run each call at once, each in its own thread; their results in order."""
    out: list = [None] * len(calls)
    threads = [threading.Thread(target=lambda i=i, c=c: out.__setitem__(i, c())) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    return out


def test_one_client_gets_its_share_and_a_one_line_refusal(busy_lab):
    """A client firing more new baselines than its share a minute: the rest refused at once in one line."""
    relay, url, config = busy_lab
    runs = baselines(config)[30:30 + PER_MINUTE + 4]  # baselines nobody picked yet: each a new computation
    sessions = [f"one-client-{i}" for i in range(len(runs))]
    in_threads([lambda s=s: pick_baseline(relay, config, None, s, "198.51.100.7") for s in sessions])  # pages open
    drain()
    switches, out = under_load(url, lambda: in_threads(
        [lambda r=r, s=s: pick_baseline(relay, config, r, s, "198.51.100.7") for r, s in zip(runs, sessions)]),
        len(runs))
    refused = [r for r in out if any("statistics: at most" in line for line in r["logs"])]
    assert refused and len(out) - len(refused) >= PER_MINUTE - 1, [r["logs"] for r in out]
    assert all(len(line.splitlines()) == 1 and "Traceback" not in line for r in refused for line in r["logs"])
    assert max(switches) < SWITCH_LIMIT_S, sorted(switches)[-5:]
