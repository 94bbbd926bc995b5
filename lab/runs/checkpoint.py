"""Append-only per-step checkpoint (JSON Lines) so an interrupted replay loses nothing."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from lab import jsontext
from lab.errors import LabError
from lab.security import safe_files


@dataclass(frozen=True)
class Entry:
    """One finished step of a checkpoint: its per-step row and the generation seconds it took
    (None in checkpoints written before per-step timing)."""

    row: dict
    gen_sec: float | None = None


class Checkpoint:
    """`<run>.partial.jsonl`: a header line, then one finished per-step row per line.

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
