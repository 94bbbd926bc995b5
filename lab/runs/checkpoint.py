"""Append-only per-step checkpoint (JSON Lines) so an interrupted replay loses nothing."""
from __future__ import annotations

import json
import os
from pathlib import Path


class Checkpoint:
    """`<run>.partial.jsonl`: a header line, then one finished per-step row per line.

    Each row is flushed as it is written and fsynced at the end of every chunk. A torn last line (the process died
    mid-write) is ignored on reading, so resuming redoes at most that one step.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fh = None

    def exists(self) -> bool:
        return self.path.is_file()

    def read(self) -> tuple[dict | None, list[dict]]:
        """Return (header, rows) written so far."""
        if not self.exists():
            return None, []
        header, rows = None, []
        with self.path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue  # torn write at the end of an interrupted run
                if "header" in obj:
                    header = obj["header"]
                elif "row" in obj:
                    rows.append(obj["row"])
                elif "timings" in obj and header is not None:
                    header["timings"] = obj["timings"]
        return header, rows

    def start(self, header: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps({"header": header}, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, row: dict) -> None:
        """Write one finished row and flush it: a killed process keeps every appended row."""
        if self._fh is None:
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps({"row": row}, ensure_ascii=False) + "\n")
        self._fh.flush()

    def append_timings(self, timings: dict) -> None:
        """Record cumulative timings (the last such line wins on reading)."""
        if self._fh is None:
            self._fh = self.path.open("a", encoding="utf-8")
        self._fh.write(json.dumps({"timings": timings}) + "\n")
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
