"""`python -m lab training …`: the evaluations of a training run made with TB2LiteCallback.

    finish DIR [--retry]   evaluate what is left (queued, interrupted; with --retry the failed too), then the
                           whole replay of the checkpoints the series judgement on the subset keeps
    status DIR [--json]    each checkpoint's evaluations: coverage, status, score, why
    worker DIR --follow    what the callback starts beside training (it follows the training's saves)

DIR is a series' state folder (`OUTPUT/tb2lite-eval/SERIES`, the line the training's log gives), or the
training's output folder or its `tb2lite-eval` folder when they hold one series.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path

from lab.errors import LabError


def add_arguments(parser: argparse.ArgumentParser):
    sub = parser.add_subparsers(dest="training_command", required=True)
    finish = sub.add_parser("finish", help="evaluate what a training run left: queued and interrupted evaluations, "
                                           "then the whole replay of the checkpoints the series judgement keeps")
    finish.add_argument("dir", help="the series' state folder (OUTPUT/tb2lite-eval/SERIES), or the output folder")
    finish.add_argument("--retry", action="store_true", help="also try the failed evaluations again")
    status = sub.add_parser("status", help="each checkpoint's evaluations: coverage, status, score, why")
    status.add_argument("dir", help="the series' state folder, or the output folder")
    status.add_argument("--json", action="store_true", help="the jobs and the judgement as JSON")
    worker = sub.add_parser("worker", help="the evaluation worker the callback starts beside training")
    worker.add_argument("dir", help="the series' state folder (OUTPUT/tb2lite-eval/SERIES)")
    worker.add_argument("--follow", action="store_true", help="wait for the training's next saves until it ends")
    worker.add_argument("--training-pid", type=int, default=None, help="stop when this process is gone")
    return sub


def series_folder(given: str) -> Path:
    """The state folder DIR names (module docstring); a LabError saying what is there otherwise."""
    from lab.training.options import training_defaults

    path = Path(given).expanduser()
    if (path / "plan.json").is_file():
        return path
    for base in (path / training_defaults()["state_folder"], path):
        found = sorted(p.parent for p in base.glob("*/plan.json")) if base.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise LabError(f"{given}: holds the evaluations of {len(found)} series ({', '.join(p.name for p in found)});"
                           f" give one: {found[0]}")
    raise LabError(f"{given}: no evaluation state of a training run (a folder with plan.json, as "
                   "OUTPUT/tb2lite-eval/SERIES)")


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGTERM or Ctrl-C: stop after the evaluation under way is cut (what it finished is kept); a second one
    ends at once."""
    def handler(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, handler)


def _follow_training(pid: int | None, stop: threading.Event) -> None:
    """Set `stop` when the training process is gone: stdin (its pipe) at its end, or the pid no longer alive."""
    from lab.training.worker_process import pid_alive

    def read_stdin() -> None:
        try:  # the raw descriptor: a daemon thread blocked in sys.stdin's buffer would hold its lock at exit
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        stop.set()

    def watch_pid() -> None:
        while not stop.wait(1.0):
            if pid is not None and not pid_alive(pid):
                stop.set()

    threading.Thread(target=read_stdin, name="tb2lite-training-pipe", daemon=True).start()
    threading.Thread(target=watch_pid, name="tb2lite-training-pid", daemon=True).start()


def _say(line: str) -> None:
    from datetime import datetime

    print(f"{datetime.now():%H:%M:%S} {line}", flush=True)


def run(args: argparse.Namespace) -> int:
    folder = series_folder(args.dir)
    if args.training_command == "status":
        return _status(folder, args.json)
    from lab.training.jobs import FINISHED, Heartbeat, JobBook, finish_command, hold_lock

    lock = hold_lock(JobBook(folder))  # one worker at a time; then a heartbeat before the heavy imports
    beat = Heartbeat(JobBook(folder)).__enter__()
    stop = threading.Event()
    follow = args.training_command == "worker" and args.follow
    if follow:
        _follow_training(args.training_pid, stop)
    from lab.engines.servers import install_exit_handlers
    from lab.training.worker import run_worker

    install_exit_handlers()
    _stop_on_signals(stop)
    jobs = run_worker(folder, follow=follow, stop=stop, say=_say, retry=getattr(args, "retry", False), beat=beat,
                      lock=lock)
    left = [j for j in jobs if j.status not in FINISHED]
    if left:
        _say(f"{len(left)} evaluation(s) left ({', '.join(j.label for j in left)}); finish them with: "
             f"{finish_command(folder)}")
        return 1
    failed = [j for j in jobs if j.status == "failed"]
    _say(f"all evaluations of {JobBook(folder).plan().get('series')} finished" +
         (f"; {len(failed)} failed (try them again: {finish_command(folder)} --retry)" if failed else ""))
    return 0


def _status(folder: Path, as_json: bool) -> int:
    from lab.training.jobs import JobBook
    from lab.training.status import status_rows, status_text

    book = JobBook(folder)
    if as_json:
        print(json.dumps({"series": book.plan().get("series"), "jobs": status_rows(book),
                          "judgement": book.judgement()}, indent=1))
    else:
        print(status_text(book))
    return 0
