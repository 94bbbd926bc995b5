"""A sweep pointed at a port where something listens that is not Ray: a plain TCP listener that accepts and
never answers. Ray's driver dials the node's own address for a loopback HEAD (127.0.0.1:PORT becomes
NODE_IP:PORT), so the listener sits at both; one bound to 127.0.0.1 only (Ray's dial refused) is the other
case. The CLI gives one
line in seconds (it gave nothing for minutes); in a real `python app.py --ray …` a second visitor of
/run_sweep is answered at once, Stop ends the connect and frees the slot."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers_app import app_process, lab_env
from tests.paths import EXCERPT
from tests.sweep.test_sweep_ray import ROOT, env_for

pytestmark = [pytest.mark.ray, pytest.mark.slow,
              pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")]


def node_ip() -> str:
    """The address Ray's driver dials for a loopback head (Ray's own rule)."""
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def bind_both(hosts: list[str]) -> list[socket.socket]:
    """Listening sockets on one port number at each of `hosts` (a port free on all of them)."""
    for _ in range(50):
        first = socket.socket()
        first.bind((hosts[0], 0))
        port, socks = first.getsockname()[1], [first]
        try:
            for host in hosts[1:]:
                other = socket.socket()
                socks.append(other)
                other.bind((host, port))
        except OSError:
            for sock in socks:
                sock.close()
            continue
        for sock in socks:
            sock.listen(64)
        return socks
    raise RuntimeError(f"no port free on all of {hosts}")


@contextmanager
def silent_listener(*hosts: str):
    """A TCP listener at `hosts` (one port) that accepts every connection and never sends a byte; yields the port."""
    servers = bind_both(list(hosts))
    held: list[socket.socket] = []
    over = threading.Event()

    def accept(server: socket.socket) -> None:
        server.settimeout(0.2)
        while not over.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    threads = [threading.Thread(target=accept, args=(server,), daemon=True) for server in servers]
    for thread in threads:
        thread.start()
    try:
        yield servers[0].getsockname()[1]
    finally:
        over.set()
        for thread in threads:
            thread.join()
        for conn in held + servers:
            conn.close()


def cli_sweep(address: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lab", "sweep", "--replay", str(EXCERPT), "--limit", "1", "--engine",
                           "reference", "--out", str(tmp_path / "out"), "--ray", address], cwd=ROOT,
                          env=env_for(tmp_path), capture_output=True, text=True, timeout=150)
    return done, time.perf_counter() - t0


def test_cli_sweep_at_a_port_that_is_not_ray_is_one_line_in_seconds(tmp_path):
    with silent_listener("127.0.0.1", node_ip()) as port:  # where the user points and where Ray dials
        done, took = cli_sweep(f"127.0.0.1:{port}", tmp_path)
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"the Ray cluster at 127.0.0.1:{port} (Ray dials {node_ip()}:{port}) accepts connections but gives no " \
           "Ray answer" in errors[0], errors
    assert took < 90, took  # Python's and the lab's start included, on a loaded machine; it was minutes
    print(f"\nCLI sweep at a silent listener: one line after {took:.1f} s")

    with silent_listener("127.0.0.1") as port:  # answers the loopback address only: not where Ray dials
        done, took = cli_sweep(f"127.0.0.1:{port}", tmp_path)
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr[-2000:]
    assert errors[0].startswith(f"error: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused; "
                                f"Ray dials {node_ip()}:{port})"), errors
    assert took < 30, took


def test_app_sweep_at_a_port_that_is_not_ray_answers_everyone_and_stop_frees_the_slot(tmp_path):
    """Tab A's sweep connects (to a silent listener); tab B's gets "already running" at once; Stop ends A
    within seconds; tab C then runs (and gets the one line about the port), not "already running"."""
    from gradio_client import Client

    from tests.ui.test_sweep_ui import sweep_args

    env = lab_env(LAB_LOG_DIR=str(tmp_path / "logs"), LAB_CACHE_DIR=str(tmp_path), LAB_DB=str(tmp_path / "lab.duckdb"),
                  LAB_RESULTS_DIR=str(tmp_path / "results"))
    with silent_listener("127.0.0.1", node_ip()) as port:
        with app_process(["--replay", str(EXCERPT), "--results", str(tmp_path / "results"), "--engine", "reference",
                          "--ray", f"127.0.0.1:{port}"], tmp_path / "app.log", env=env, timeout=240) as (url, _):
            a, b, c = (Client(url, verbose=False) for _ in range(3))
            job = a.submit(*sweep_args(["reference"]), api_name="/run_sweep")
            deadline = time.time() + 60
            while not any("connecting to the Ray cluster" in o for o in job.outputs()):
                assert time.time() < deadline and not job.done(), "tab A never showed 'connecting'"
                time.sleep(0.2)
            t0 = time.perf_counter()
            second = b.submit(*sweep_args(["reference"]), api_name="/run_sweep").result(timeout=30)
            answered_in = time.perf_counter() - t0
            assert "A cluster sweep is already running in this lab" in second, second[:500]
            t0 = time.perf_counter()
            c.predict(api_name="/stop_batch")
            first = job.result(timeout=30)
            stopped_in = time.perf_counter() - t0
            assert f"stopped while connecting to the Ray cluster at 127.0.0.1:{port}" in first, first[:800]
            t0 = time.perf_counter()
            third = c.submit(*sweep_args(["reference"]), api_name="/run_sweep").result(timeout=120)
            third_in = time.perf_counter() - t0
            assert "already running" not in third, third[:800]
            assert "accepts connections but gives no Ray answer" in third, third[:800]
            assert third_in < 60, third_in
        log = (tmp_path / "app.log").read_text()
    assert "Traceback" not in log, log[-3000:]
    print(f"\nsecond tab answered in {answered_in:.1f} s; Stop ended the connect in {stopped_in:.1f} s; "
          f"the next sweep's one line after {third_in:.1f} s")
