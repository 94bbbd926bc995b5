"""Where the app writes files for download, and their cleanup.

Gradio copies a returned file into its own cache (cleaned by the Blocks' `delete_cache`)
before the browser downloads it, so the lab's copy is needed only briefly: every export goes
into one folder per process, a background sweep deletes each export `max_age` seconds after it
was made (LAB_EXPORT_MAX_AGE_S, default 120: public_limits.yaml; checked every second or
sooner), and the whole folder is removed when the process exits.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import time
from pathlib import Path


def export_max_age() -> float:
    """Seconds an export stays on disk (LAB_EXPORT_MAX_AGE_S, else public_limits.yaml)."""
    from lab.visitors import public_limit

    return public_limit("export_max_age_s")


class ExportArea:
    """A process-wide temporary folder of short-lived export folders, swept in the background."""

    def __init__(self, max_age: float | None = None, prefix: str = "lab-exports-") -> None:
        self.max_age = export_max_age() if max_age is None else max_age
        self.prefix = prefix
        self._root: Path | None = None
        self._lock = threading.Lock()
        self._sweeper: threading.Thread | None = None

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None or not self._root.is_dir():
                self._root = Path(tempfile.mkdtemp(prefix=self.prefix))
                atexit.register(shutil.rmtree, self._root, True)
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_forever, name="lab-exports-sweep", daemon=True)
                self._sweeper.start()
            return self._root

    def _sweep_forever(self) -> None:
        """Delete each export `max_age` seconds after it was made (at most a second late)."""
        tick = min(1.0, max(0.1, self.max_age / 4))
        while True:
            time.sleep(tick)
            with self._lock:
                root = self._root
            if root is not None and root.is_dir():
                self.sweep(root=root)

    def new_dir(self) -> Path:
        """A fresh folder for one export (older exports are deleted first)."""
        self.sweep()
        return Path(tempfile.mkdtemp(prefix="export-", dir=self.root))

    def sweep(self, now: float | None = None, root: Path | None = None) -> int:
        """Delete export folders older than `max_age`; returns how many were deleted."""
        now = time.time() if now is None else now
        removed = 0
        try:
            children = list((root or self.root).iterdir())
        except OSError:  # removed meanwhile (the process is closing)
            return 0
        for child in children:
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
