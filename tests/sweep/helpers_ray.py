"""Real Ray nodes started with the `ray` command on this machine, as a person starts them (`ray start --head`,
`ray start --address`), each in its own session and temporary folder. Ending one ends exactly the processes
it started (its process group), never another cluster on the machine: `ray stop` would end every Ray process
of this user, other people's clusters included, so the tests never call it."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

STORE = 80 * 1024 * 1024


def group_processes(pgid: int) -> list[psutil.Process]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


def kill_group(pgid: int, grace: float = 20.0) -> None:
    """SIGTERM the group, SIGKILL what is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + wait
        while group_processes(pgid) and time.time() < deadline:
            time.sleep(0.3)


@dataclass
class RayNode:
    """One `ray start` node: its process group, its temporary folder and its environment."""

    pgid: int
    temp_dir: Path
    env: dict
    output: str
    head: bool = False
    ended: bool = field(default=False)

    def processes(self) -> list[psutil.Process]:
        return group_processes(self.pgid)

    def raylet(self) -> psutil.Process:
        return next(p for p in self.processes() if p.name() == "raylet")

    def runs(self, text: str) -> bool:
        """Whether one of this node's processes has `text` in its command line (an actor: ray::CLASS).
        The node's workers (actors) are the raylet's children, outside the node's process group."""
        procs = self.processes()
        for proc in list(procs):
            try:
                procs += proc.children(recursive=True)
            except psutil.Error:
                continue
        for proc in procs:
            try:
                if text in " ".join(proc.cmdline()):
                    return True
            except psutil.Error:
                continue
        return False

    def end(self) -> None:
        if not self.ended:
            kill_group(self.pgid)
            self.ended = True


STARTUP_TIMEOUT = "timed out during startup"  # Ray gives a node 30 s to register (hard-coded): a loaded machine


def start_node(env: dict, *, head_port: int | None = None, address: str | None = None, num_cpus: int = 1,
               extra: list[str] = (), tries: int = 3) -> RayNode:
    """`ray start --head --port PORT` or `ray start --address ADDRESS` (with `extra` arguments) in a new
    session with `env`; the node's temporary folder is short (Unix socket paths are limited to 107 bytes).
    A start Ray gave up on for its 30-second registration limit is tried again (`tries` in all)."""
    for attempt in range(tries):
        try:
            return _start_node(env, head_port, address, num_cpus, extra)
        except RuntimeError as exc:
            if STARTUP_TIMEOUT not in str(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


def _start_node(env: dict, head_port: int | None, address: str | None, num_cpus: int, extra: list[str]) -> RayNode:
    temp_dir = Path(tempfile.mkdtemp(prefix="labray-", dir="/tmp"))
    args = ["ray", "start", "--num-cpus", str(num_cpus), "--object-store-memory", str(STORE), "--temp-dir",
            str(temp_dir), "--disable-usage-stats", "--include-log-monitor", "false"]  # the sweep never streams logs
    if head_port is not None:
        args += ["--head", "--port", str(head_port), "--include-dashboard", "false"]
    else:
        args += ["--address", address]
    args += list(extra)
    log = temp_dir.with_suffix(".log")  # a file, not a pipe: the node's daemons must not hold the reader open
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    node = RayNode(proc.pid, temp_dir, env, "", head=head_port is not None)
    try:
        proc.wait(timeout=300)
    except BaseException:  # too slow, or the test's own timeout: end what was started
        node.end()
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    finally:
        node.output = log.read_text(errors="replace")
        log.unlink()
    if proc.returncode != 0:
        node.end()
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise RuntimeError(f"{' '.join(args[:4])} failed:\n{node.output[-3000:]}")
    return node


def end_nodes(nodes: list[RayNode]) -> list[str]:
    """End every node (workers first), remove their folders; the command lines of processes left (none
    expected), raylet and gcs_server included."""
    for node in reversed(nodes):
        node.end()
    left = [" ".join(p.cmdline())[:200] for node in nodes for p in node.processes()]
    for node in nodes:
        shutil.rmtree(node.temp_dir, ignore_errors=True)
    return left


def wait_alive(driver_env: dict, address: str, count: int, timeout: float = 120.0) -> None:
    """Wait until the cluster at `address` has `count` alive nodes (asked with `ray status`, as a person does)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run(["ray", "status", "--address", address], env=driver_env, capture_output=True, text=True,
                             timeout=60).stdout
        active = out.split("Active:")[-1].split("Pending:")[0] if "Active:" in out else ""
        if active.count("node_") >= count:
            return
        time.sleep(1.0)
    raise RuntimeError(f"the cluster at {address} did not reach {count} alive nodes")


def wait_until(predicate, timeout: float, every: float = 0.5) -> float:
    """Poll `predicate` until it holds or `timeout` seconds pass; the seconds waited."""
    started = time.monotonic()
    while not predicate() and time.monotonic() - started < timeout:
        time.sleep(every)
    return time.monotonic() - started
