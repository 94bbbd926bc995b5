"""One engine (or shard) on a Ray node: the lab's own engine, supervisor and `replay`, streaming finished steps back.

The worker writes only a private checkpoint in a temporary folder (the lab's replay code path, unchanged);
the driver alone writes result files, checkpoints and the store. The folder goes when the actor closes or
the driver stops it (`discard`); one left by an actor that was killed outright (its node lost, its driver
killed) goes when the next actor on that machine starts or closes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

from lab.runs.checkpoint import Checkpoint, Entry


PREFIX = "lab-sweep-"
_OWNED = re.compile(rf"{PREFIX}(\d+)-")  # lab-sweep-PID-XXXX: the folder of the actor process PID


def _key(row: dict) -> str:
    return f"{row.get('task_id')}/{row.get('step_idx')}"


def remove_orphans() -> None:
    """Remove the temporary folders of sweep actors that no longer run on this machine."""
    import psutil

    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        owner = _OWNED.match(path.name)
        if owner and path.is_dir() and not psutil.pid_exists(int(owner[1])):
            shutil.rmtree(path, ignore_errors=True)


class EngineWorker:
    """Loads one engine SPEC on its node and replays a list of steps with `lab.runs.replay.replay`."""

    def __init__(self, spec: str, audit: bool = False):
        self.spec = spec
        self.opened: list[str] = []
        if audit:
            sys.addaudithook(self._audit)
        self.engine = None
        remove_orphans()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))

    def _audit(self, event: str, args: tuple) -> None:
        if event == "open" and args and isinstance(args[0], (str, bytes)):
            self.opened.append(str(args[0]))

    def opened_files(self) -> list[str]:
        """Every path this worker process opened (with `audit`)."""
        return list(self.opened)

    def where(self) -> str:
        """The node this actor runs on: its address and the start of its Ray node id."""
        import ray

        context = ray.get_runtime_context()
        return f"{ray.util.get_node_ip_address()} · {context.get_node_id()[:8]}"

    def prepare(self, run_name: str | None) -> str:
        """Load the engine; return the run's file stem."""
        from lab.engines import create_engine
        from lab.runs.replay import run_file_name

        t0 = time.perf_counter()
        self.engine = create_engine(self.spec)
        self.engine.load()
        if getattr(self.engine, "load_time_sec", None) is None:
            self.engine.load_time_sec = time.perf_counter() - t0
        return run_file_name(self.engine, run_name)

    def missing(self, keys: list[str]) -> int:
        """How many of these steps the loaded engine has no answer for: a stored run covers only the steps
        it answered (they are left out of its file); every other engine answers all."""
        rows = getattr(self.engine, "rows", None) if getattr(self.engine, "kind", "") == "stored" else None
        return 0 if rows is None else sum(1 for key in keys if key not in rows)

    def run(self, steps: list, options: dict, header: dict | None, entries: list[Entry]) -> Iterator[tuple]:
        """Replay `steps`, resuming from `entries` (the rows the driver already holds); yield
        ("header", header), ("row", row, gen_sec) … and finally ("result", result_dict)."""
        from lab.runs.replay import ReplayConfig, replay

        from lab.sweep.options import sampling_for

        config = ReplayConfig(out_dir=self.dir, sampling=sampling_for(self.engine, options), **options["config"])
        config.run_name = options["config"].get("run_name")
        from lab.runs.replay import run_file_name

        checkpoint = Checkpoint(self.dir / f"{run_file_name(self.engine, config.run_name)}.partial.jsonl")
        if header is not None:
            checkpoint.start(header)
            for entry in entries:
                checkpoint.append(entry.row, entry.gen_sec)
            checkpoint.close()
            config.resume = True
        box: dict = {}

        def work() -> None:
            try:
                box["path"] = replay(self.engine, steps, config)
            except BaseException as exc:  # reported to the driver below
                box["error"] = exc

        thread = threading.Thread(target=work, daemon=True)
        thread.start()
        offset, sent_header = 0, header is not None
        skip = len(entries)
        sent = {_key(e.row) for e in entries}
        while True:
            finished = not thread.is_alive()
            if checkpoint.path.is_file():
                data = checkpoint.path.read_bytes()
                end = data.rfind(b"\n") + 1
                for raw in data[offset:end].splitlines():
                    obj = json.loads(raw)
                    if "header" in obj and not sent_header:
                        sent_header = True
                        yield ("header", obj["header"])
                    elif "row" in obj:
                        if skip:
                            skip -= 1
                            continue
                        sent.add(_key(obj["row"]))
                        yield ("row", obj["row"], obj.get("gen_sec"))
                offset = end
            if finished:
                break
            time.sleep(0.05)
        if "error" in box:
            raise box["error"]
        result = json.loads(Path(box["path"]).read_text(encoding="utf-8"))
        for row in result["per_step"]:  # rows finished after the last look at the checkpoint
            if _key(row) not in sent:
                yield ("row", row, None)
        if options["config"].get("extra", {}).get("num_shards"):  # the merge recomputes the run's context stats
            from lab.runs.pipeline import render_for_engine

            yield ("lengths", [render_for_engine(self.engine, s).n_tokens for s in steps])
        yield ("result", result)

    def discard(self) -> None:
        """Remove this actor's folder (the driver holds every step received): called just before a stop kills it."""
        shutil.rmtree(self.dir, ignore_errors=True)

    def close(self) -> None:
        """Close the engine (its server stops) and remove this actor's folder and any orphaned ones."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        self.discard()
        remove_orphans()
