"""One engine (or shard) on a Ray node: the lab's own engine, supervisor and `replay`, streaming finished steps back.

The worker writes only a private checkpoint in a temporary folder (the lab's replay code path, unchanged);
the driver alone writes result files, checkpoints and the store. The folder goes when the actor closes or
the driver stops it (`discard`); one left by an actor that was killed outright (its node lost, its driver
killed) goes as soon as its actor process is gone (lab.sweep.leftovers: a keeper beside each actor), or
else when any lab process next starts on that machine.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

from lab.runs.checkpoint import Checkpoint, Entry
from lab.runs.claims import partial_path
from lab.sweep.leftovers import PREFIX, keep, remove_orphans
from lab.sweep.options import ANSWERS, REFERENCE, JobOptions


def _key(row: dict) -> str:
    return f"{row.get('task_id')}/{row.get('step_idx')}"


class EngineWorker:
    """Loads one engine SPEC on its node and replays a list of steps with `lab.runs.replay.replay` (or scores
    their reference answers with `lab.runs.reference_run.score_reference_run`)."""

    def __init__(self, spec: str, audit: bool = False):
        self.spec = spec
        self.opened: list[str] = []
        if audit:
            sys.addaudithook(self._audit)
        self.engine = None
        remove_orphans()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        keep(self.dir)  # gone with this actor, however it ends

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

    def prepare(self, run_name: str | None, what: str = ANSWERS) -> str:
        """Load the engine; return the run's file stem (`NAME.reference` for a reference-likelihood run)."""
        from lab.engines import create_engine

        t0 = time.perf_counter()
        self.engine = create_engine(self.spec)
        self.engine.load()
        if self.engine.load_time_sec is None:
            self.engine.load_time_sec = time.perf_counter() - t0
        return self._stem(run_name, what)

    def _stem(self, run_name: str | None, what: str) -> str:
        from lab.runs.reference_run import SUFFIX
        from lab.runs.replay import run_file_name

        return run_file_name(self.engine, run_name) + (SUFFIX if what == REFERENCE else "")

    def _job(self, steps: list, options: JobOptions) -> tuple[object, Callable[[], Path]]:
        """The run's config (its `resume` set when the driver hands rows back) and the call that makes its
        file in this actor's folder: `replay` for answers, `score_reference_run` for the reference's likelihood."""
        source = options.source
        if options.what == REFERENCE:
            from lab.runs.reference_run import ReferenceConfig, score_reference_run

            ref = ReferenceConfig(out_dir=self.dir, run_name=options.run_name, replay_fingerprint=source.fingerprint,
                                  selection=options.run.selection, eval_path=source.path)
            return ref, lambda: score_reference_run(self.engine, steps, ref)
        from lab.runs.options import replay_config
        from lab.runs.replay import replay

        # this actor's own folder: a run resumes only from the rows the driver hands back (`run`), never replaces
        run = replace(options.run, resume=False, overwrite=False)
        config = replay_config(run, self.engine, source, self.dir, run_name=options.run_name, extra=options.extra)
        config.only = options.only  # a race's round: these steps now, the rest stay for later rounds
        return config, lambda: replay(self.engine, steps, config)

    def missing(self, keys: list[str]) -> int:
        """How many of these steps the loaded engine has no answer for: a stored run covers only the steps
        it answered (they are left out of its file); every other engine answers all."""
        return sum(1 for key in keys if not self.engine.covers(key))

    def run(self, steps: list, options: JobOptions, header: dict | None, entries: list[Entry]) -> Iterator[tuple]:
        """Replay `steps` (or score their references: `options.what`), resuming from `entries` (the rows
        the driver already holds); yield ("header", header), ("row", row, gen_sec) … and finally ("result", result_dict),
        or ("partial",) when `options.only` left steps for a later call (a race's round)."""
        what = options.what
        config, make_file = self._job(steps, options)
        checkpoint = Checkpoint(partial_path(self.dir, self._stem(options.run_name, what)))  # the one replay writes
        if header is not None:
            checkpoint.start(header)
            for entry in entries:
                checkpoint.append(entry.row, entry.gen_sec)
            checkpoint.close()
            config.resume = True
        box: dict = {}

        def work() -> None:
            try:
                box["path"] = make_file()
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
        if Path(box["path"]) == checkpoint.path:  # the run goes on in a later round: every row was read above
            yield ("partial",)
            return
        result = json.loads(Path(box["path"]).read_text(encoding="utf-8"))
        if what == REFERENCE:  # a shard's file says so, as a replay shard's does (`replay` writes `extra` itself)
            result.update(options.extra)
        for row in result["per_step"]:  # rows finished after the last look at the checkpoint
            if _key(row) not in sent:
                yield ("row", row, None)
        if what == ANSWERS and options.extra.get("num_shards"):  # the merge recomputes context stats
            from lab.prompts.engine_prompt import render_for_engine

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
