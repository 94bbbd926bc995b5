"""Where the app writes files for download, and their cleanup.

Gradio copies a returned file into its own cache (cleaned by the Blocks' `delete_cache`)
before the browser downloads it, so the lab's copy is needed only briefly: every export goes
into one folder per process, exports older than `max_age` seconds are deleted whenever a new
one is made, and the whole folder is removed when the process exits.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
from pathlib import Path

DEFAULT_MAX_AGE_SEC = 120.0


class ExportArea:
    """A process-wide temporary folder of short-lived export folders."""

    def __init__(self, max_age: float = DEFAULT_MAX_AGE_SEC, prefix: str = "lab-exports-") -> None:
        self.max_age = max_age
        self.prefix = prefix
        self._root: Path | None = None
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                self._root = Path(tempfile.mkdtemp(prefix=self.prefix))
                atexit.register(shutil.rmtree, self._root, True)
            return self._root

    def new_dir(self) -> Path:
        """A fresh folder for one export (older exports are deleted first)."""
        self.sweep()
        return Path(tempfile.mkdtemp(prefix="export-", dir=self.root))

    def sweep(self, now: float | None = None) -> int:
        """Delete export folders older than `max_age`; returns how many were deleted."""
        now = time.time() if now is None else now
        removed = 0
        for child in self.root.iterdir():
            try:
                if now - child.stat().st_mtime >= self.max_age:
                    shutil.rmtree(child, ignore_errors=True)
                    removed += 1
            except OSError:
                continue
        return removed

    def remove(self) -> None:
        """Delete everything now (e.g. when the app closes)."""
        with self._lock:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None


EXPORTS = ExportArea()
