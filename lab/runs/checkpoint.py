"""Append-only per-step checkpoint (JSON Lines) so an interrupted replay loses nothing."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from lab import jsontext


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
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fh = None

    def exists(self) -> bool:
        return self.path.is_file()

    def read(self) -> tuple[dict | None, list[dict]]:
        """Return (header, rows) written so far."""
        header, entries = self.read_entries()
        return header, [e.row for e in entries]

    def read_entries(self) -> tuple[dict | None, list[Entry]]:
        """Return (header, finished steps with their generation seconds) written so far."""
        if not self.exists():
            return None, []
        header, entries = None, []
        for raw in self.path.read_bytes().splitlines():
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

    def start(self, header: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, row: dict, gen_sec: float | None = None) -> None:
        """Write one finished row (and the seconds its generation took) and flush it: a killed process
        keeps every appended row and its time."""
        if self._fh is None:
            self._fh = self.path.open("a", encoding="utf-8")
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
