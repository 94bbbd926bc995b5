"""Sweep actors' temporary folders (`lab-sweep-PID-XXXX`) whose actor is gone.

An actor removes its folder when it closes, and the driver's stop when it kills one; an actor killed
outright (its driver killed with kill -9 on a `ray start` cluster: Ray then ends the driver's actors,
which run no clean-up) leaves its folder. So each actor starts a keeper beside itself (`keep`): a small
process of its own (detached from the actor, so Ray's ending of the actor's children does not reach it)
that removes the folder as soon as the actor process is gone, then ends; it ends too once the folder is
gone (a normal close). And the start of any lab process (the CLI, `python app.py`) removes the folders
of actors no longer running on its machine (`remove_orphans`). Standard library and psutil only: the
CLI's light commands import this.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab.sweep.process_start import same_process_running, start_mark

PREFIX = "lab-sweep-"
_OWNED = re.compile(rf"{PREFIX}(\d+)-")  # lab-sweep-PID-XXXX: the folder of the actor process PID
TICK_S = 0.5


def remove_orphans(folder: str | Path | None = None) -> list[Path]:
    """Remove the temporary folders of sweep actors that no longer run on this machine (in `folder`, default
    the temporary folder); returns those removed. Never raises: a lab process starts whatever is there."""
    removed = []
    try:
        paths = list(Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*"))
    except OSError:
        return removed
    for path in paths:
        owner = _OWNED.match(path.name)
        if owner and path.is_dir() and not path.is_symlink() and not same_process_running(int(owner[1])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def keep(folder: Path, pid: int | None = None) -> None:
    """Start the keeper of `folder`, an actor's temporary folder: it removes the folder once process `pid`
    (default: this one) is gone."""
    pid = os.getpid() if pid is None else pid
    started = start_mark(pid)
    root = str(Path(__file__).resolve().parents[2])  # where `lab` is, whatever the actor's working folder
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    starter = subprocess.Popen([sys.executable, "-m", "lab.sweep.leftovers", str(pid), repr(started), str(folder)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, close_fds=True, env=env)
    threading.Thread(target=starter.wait, name="lab-sweep-keeper", daemon=True).start()  # it forks and ends at once


def _watch(pid: int, started: float, folder: Path) -> None:
    while folder.is_dir() and same_process_running(pid, started):
        time.sleep(TICK_S)
    if folder.is_dir() and _OWNED.match(folder.name):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    pid, started, folder = int(argv[0]), float(argv[1]), Path(argv[2])
    if os.fork():  # the keeper leaves the actor's process tree: Ray ends an actor's own children with it
        return 0
    _watch(pid, started, folder)
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
