"""The watchdog of a Ray instance the sweep's driver started itself (`--ray local`). Ray ties the
instance's own processes (GCS, raylet, dashboard, monitors) to the driver, but not the raylet's agents:
when the driver is killed (kill -9), the dashboard and runtime-env agents stay, waiting on a GCS that is
gone. The watchdog runs in its own session, notes every process of the instance (those naming its
session folder, and all they start) twice a second, and when its stdin ends (the driver closed it, or
died) it ends those still running (SIGTERM, then SIGKILL after a grace period) and removes the temporary
folders their sweep actors left."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time

import psutil

from lab.sweep.process_start import same_process_running, start_mark

TICK_S = 0.5
GRACE_S = 3.0


def watch(session_dir: str) -> subprocess.Popen:
    """Start the watchdog of the local instance whose session folder is `session_dir`; closing its stdin
    (or this process's death) ends the instance's leftovers and the watchdog."""
    return subprocess.Popen([sys.executable, "-m", "lab.sweep.reaper", str(os.getpid()), session_dir],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)


def _note(driver: psutil.Process, session_dir: str, known: dict[int, float]) -> None:
    """Add the instance's processes now running (pid -> start time) to `known`."""
    try:
        roots = [p for p in driver.children() if session_dir in " ".join(p.cmdline())]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return
    me = os.getpid()  # the watchdog is the driver's child too, its session folder in its command line
    for root in roots:
        if root.pid == me:
            continue
        try:
            for proc in [root, *root.children(recursive=True)]:
                known.setdefault(proc.pid, start_mark(proc.pid))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue


def _alive(known: dict[int, float]) -> list[psutil.Process]:
    """The noted processes still running (the same process: its pid not reused since)."""
    alive = []
    for pid, started in known.items():
        try:
            if same_process_running(pid, started):
                alive.append(psutil.Process(pid))
        except psutil.Error:
            continue
    return alive


def end(known: dict[int, float]) -> None:
    """SIGTERM every noted process still running, SIGKILL those left after the grace period."""
    procs = _alive(known)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, left = psutil.wait_procs(procs, timeout=GRACE_S)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=GRACE_S)  # gone (or at least dead) before their folders are looked at


def main(argv: list[str]) -> int:
    driver_pid, session_dir = int(argv[0]), argv[1]
    try:
        driver = psutil.Process(driver_pid)
    except psutil.NoSuchProcess:
        return 0
    known: dict[int, float] = {}
    while True:
        _note(driver, session_dir, known)
        ready, _, _ = select.select([sys.stdin], [], [], TICK_S)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break
    time.sleep(TICK_S)  # a normal shutdown: Ray's own ending goes first
    end(known)
    from lab.sweep.leftovers import remove_orphans

    remove_orphans()  # the temporary folders of the instance's actors, killed with it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
