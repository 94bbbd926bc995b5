"""A loopback HTTP server serving the two real published result files under their catalogue paths
(`/<commit>/<path>`), with HTTP Range support, and knobs to cut a response midway or swap a body."""
from __future__ import annotations

import http.server
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tests.helpers_servers import http_on_loopback
from tests.paths import TB2LITE


@dataclass
class ServerState:
    files: dict[str, bytes]                                  # "/<commit>/<path>" -> body
    cut_after: dict[str, int] = field(default_factory=dict)  # url path -> bytes sent before closing (once)
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (url path, Range header)


def catalogue_files() -> dict[str, bytes]:
    """URL path -> bytes for every catalogue file found byte for byte in ../shared/tb2lite/published/."""
    from lab.published.catalogue import load_catalogue

    out = {}
    for entry in load_catalogue():
        local = TB2LITE / "published" / Path(entry.path).name
        if local.is_file():
            out[f"/{entry.commit}/{entry.path}"] = local.read_bytes()
    return out


def _handler(state: ServerState):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802
            rng = self.headers.get("Range")
            state.requests.append((self.path, rng))
            body = state.files.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            if rng and rng.startswith("bytes="):
                start = int(rng[6:].split("-")[0])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            part = body[start:]
            self.send_header("Content-Length", str(len(part)))
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            cut = state.cut_after.pop(self.path, None)
            if cut is not None:
                self.wfile.write(part[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(part)

    return Handler


@contextmanager
def published_server(files: dict[str, bytes] | None = None, port: int = 0) -> Iterator[tuple[str, ServerState]]:
    """(base URL, state) of a server on 127.0.0.1 (`port`, default a free one) serving `files` (default: the
    catalogue's real files)."""
    state = ServerState(files=dict(files if files is not None else catalogue_files()))
    with http_on_loopback(_handler(state), port) as url:
        yield url, state
