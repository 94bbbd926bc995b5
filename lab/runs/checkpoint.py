"""Append-only per-step checkpoint (JSON Lines) so an interrupted replay loses nothing (`Checkpoint`), and a
run's checkpoint from its claimed name to its finished file (`RunCheckpoint`)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab import jsontext
from lab.errors import LabError
from lab.runs.claims import RunClaim, TakenFn, claim_run
from lab.security import safe_files


@dataclass(frozen=True)
class Entry:
    """One finished step of a checkpoint: its per-step row and the generation seconds it took
    (None in checkpoints written before per-step timing)."""

    row: dict
    gen_sec: float | None = None


class Checkpoint:
    """A run's checkpoint file (lab.runs.claims.partial_path): a header line, then one finished per-step row per line.

    Each row is flushed as it is written, with the generation seconds of that step, and fsynced at the end of
    every chunk. A torn last line (the process died mid-write) is ignored on reading, so resuming redoes at most
    that one step, and the resumed run's `gen_time_sec` is the sum over its steps, as in an uninterrupted run.
    The file is never opened through a link (lab.security.safe_files): a link of its name is refused.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fh = None

    def exists(self) -> bool:
        """Whether an entry has the checkpoint's name (a link too: reading it is then refused)."""
        return safe_files.entry_exists(self.path)

    def read(self) -> tuple[dict | None, list[dict]]:
        """Return (header, rows) written so far."""
        header, entries = self.read_entries()
        return header, [e.row for e in entries]

    def read_entries(self) -> tuple[dict | None, list[Entry]]:
        """Return (header, finished steps with their generation seconds) written so far."""
        if not self.exists():
            return None, []
        header, entries = None, []
        for raw in safe_files.read_bytes(self.path).splitlines():
            try:
                obj = jsontext.loads(raw)
            except jsontext.JsonTextError:
                continue  # torn write at the end of an interrupted run
            if not isinstance(obj, dict):
                continue
            if isinstance(obj.get("header"), dict):
                header = obj["header"]
            elif isinstance(obj.get("row"), dict):
                gen = obj.get("gen_sec")
                entries.append(Entry(obj["row"], float(gen) if isinstance(gen, (int, float)) else None))
            elif isinstance(obj.get("timings"), dict) and header is not None:
                header["timings"] = obj["timings"]
        return header, entries

    def read_to_resume(self) -> tuple[dict | None, list[Entry]]:
        """`read_entries` of a checkpoint this lab wrote: LabError for a file that holds anything but has no
        checkpoint header (someone else's file is never continued). An empty file (the run died before its
        header) gives (None, []): start it afresh."""
        header, entries = self.read_entries()
        if header is None and (entries or safe_files.read_bytes(self.path).strip()):
            raise LabError(f"{self.path}: not a checkpoint of a lab run (it has no checkpoint header); it is left "
                           "untouched: move it away, or pick another run name")
        return header, entries

    def start(self, header: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with safe_files.open_file(self.path, "w") as fh:
            fh.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, row: dict, gen_sec: float | None = None) -> None:
        """Write one finished row (and the seconds its generation took) and flush it: a killed process
        keeps every appended row and its time."""
        if self._fh is None:
            self._fh = safe_files.open_file(self.path, "a")
        entry = {"row": row} if gen_sec is None else {"row": row, "gen_sec": round(gen_sec, 6)}
        self._fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._fh.flush()

    def sync(self) -> None:
        """fsync what was appended (once per chunk: survives a machine crash too)."""
        if self._fh is not None:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self.sync()
            self._fh.close()
            self._fh = None

    def remove(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class RunCheckpoint:
    """A run's checkpoint over its whole life, shared by the replay, the reference run and the sweep's drivers (the
    sweep's workers and the training callback go through the replay): its name claimed in the runs folder
    (lab.runs.claims: never another's run, never through a link), its checkpoint file (`NAME` + PARTIAL) begun or
    resumed, rows appended as steps finish, and the finished result file linked into place (never replacing one
    unasked) before the checkpoint goes. Leaving it (`release`, or the `with` block) closes the file and lets the
    name go; a checkpoint holding finished steps stays for a later resume."""

    def __init__(self, claim: RunClaim, notify: Callable[[str], None] | None = None) -> None:
        self.claim, self.notify = claim, notify
        self.file = Checkpoint(claim.checkpoint)

    @classmethod
    def claim(cls, out_dir: str | os.PathLike, name: str, *, suffix: str = "", resume: bool = False,
              overwrite: bool = False, explicit: bool = False, taken: TakenFn | None = None,
              notify: Callable[[str], None] | None = None) -> "RunCheckpoint":
        """Claim the run `name` (lab.runs.claims.claim_run, whose RunNameTaken it raises); `notify` hears why it
        got another name (now or when its file is written)."""
        claim = claim_run(out_dir, name, suffix=suffix, resume=resume, overwrite=overwrite, explicit=explicit,
                          taken=taken)
        if claim.note and notify is not None:
            notify(claim.note)
        return cls(claim, notify)

    @property
    def name(self) -> str:
        """The run name it holds (the one asked for, or the free one it got)."""
        return self.claim.name

    @property
    def path(self) -> Path:
        """The checkpoint file."""
        return self.file.path

    @property
    def final(self) -> Path:
        """The result file it is to become."""
        return self.claim.final

    @property
    def resumed(self) -> bool:
        """Whether the claim holds an interrupted run of this name to continue."""
        return self.claim.resumed

    def begin(self, header: dict, same_run: Callable[[Path, dict, dict], None]) -> tuple[dict | None, list[Entry]]:
        """Begin the run's checkpoint: a resumed run's (header, finished steps), read back once `same_run(path,
        old_header, header)` accepts them (it raises otherwise); else it starts afresh with `header` (a checkpoint
        that died before its header too) and gives (None, [])."""
        old, entries = self.file.read_to_resume() if self.resumed else (None, [])
        if old is None:
            self.file.start(header)
            return None, []
        same_run(self.path, old, header)
        return old, entries

    def kept(self) -> tuple[dict | None, list[Entry]]:
        """What the checkpoint holds now, (None, []) when there is none: a driver hands it to its worker."""
        return self.file.read_to_resume() if self.file.exists() else (None, [])

    def start(self, header: dict) -> None:
        """(Re)write the checkpoint with `header` alone (a driver, from the header its worker sent)."""
        self.file.start(header)

    def append(self, row: dict, gen_sec: float | None = None) -> None:
        """One finished step (and its generation seconds), flushed at once."""
        self.file.append(row, gen_sec)

    def sync(self) -> None:
        """fsync what was appended."""
        self.file.sync()

    def close(self) -> None:
        """Close the checkpoint file (everything appended stays)."""
        self.file.close()

    def finish(self, result: dict) -> Path:
        """Write the finished run's file (lab.runs.claims.RunClaim.write_final: under another free name should
        one have appeared meanwhile, which `notify` hears) and remove the checkpoint; return the file's path."""
        self.file.close()
        path = self.claim.write_final(result)
        if path != self.claim.final and self.notify is not None:
            self.notify(self.claim.note or f"saved as {path.name}")
        self.file.remove()
        return path

    def release(self) -> None:
        """Close the file and let the name go (a checkpoint holding no step goes with it)."""
        self.file.close()
        self.claim.release()

    def __enter__(self) -> "RunCheckpoint":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
