"""Where the app writes files for download, how the browser gets them, and their cleanup.

Every export goes into one folder per process; a background sweep deletes each export `max_age` seconds
after it was made (LAB_EXPORT_MAX_AGE_S, default 120: public_limits.yaml; checked every second or sooner),
and the whole folder is removed when the process exits. The browser downloads an export from the lab's own
route, `/lab-exports/TOKEN/NAME` (a random token per export and the file's name): never through Gradio's
file component, whose answer handed the visitor the absolute path of Gradio's cache on the server. The
route sends the file as an attachment that the browser never renders (`nosniff`), and only while it lasts.
"""
from __future__ import annotations

import atexit
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

from lab.ui.shell.html_text import esc

ROUTE = "/lab-exports"


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
        self._links: dict[str, Path] = {}  # token -> the export it downloads

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
        with self._lock:
            self._links = {t: p for t, p in self._links.items() if p.is_file()}
        return removed

    def link(self, path: Path) -> str:
        """The URL path the browser downloads `path` from: a fresh random token and the file's name, never where
        the file lies."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._links[token] = Path(path)
        return f"{ROUTE}/{token}/{quote(Path(path).name)}"

    def find(self, token: str, name: str) -> Path | None:
        """The export a link names, while it lasts (None for an unknown token, another name or a swept file)."""
        with self._lock:
            path = self._links.get(token)
        if path is None or path.name != name or not path.is_file():
            return None
        return path

    def remove(self) -> None:
        """Delete everything now (e.g. when the app closes)."""
        with self._lock:
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None


EXPORTS = ExportArea()


def download_html(path: Path, what: str = "") -> str:
    """A download link to an export (its name and size), for the gr.HTML that shows it."""
    size = Path(path).stat().st_size
    shown = f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"
    return (f'<a href="{esc(EXPORTS.link(Path(path)))}" download="{esc(Path(path).name)}">Download '
            f'{esc(Path(path).name)}</a> <span class="lab-muted">({shown}{", " + esc(what) if what else ""}; '
            f'kept {EXPORTS.max_age:g} s)</span>')


async def serve_export(request):
    """GET /lab-exports/TOKEN/NAME: the export as an attachment, or 404 in one line once it is gone."""
    from starlette.responses import FileResponse, PlainTextResponse

    path = EXPORTS.find(str(request.path_params.get("token", "")), str(request.path_params.get("name", "")))
    if path is None:
        return PlainTextResponse("this export is gone (exports are kept for a short while): export it again",
                                 status_code=404, headers={"Cache-Control": "no-store"})
    return FileResponse(path, filename=path.name, media_type="application/octet-stream",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


def export_routes() -> list:
    """The route launch() adds to Gradio's app (lab.ui.app.launch_options)."""
    from starlette.routing import Route

    return [Route(ROUTE + "/{token}/{name}", serve_export, methods=["GET", "HEAD"])]
