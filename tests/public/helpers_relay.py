"""A TCP relay on loopback whose connections to the app come from another local address.

Linux routes all of 127.0.0.0/8 to the loopback device, so a socket bound to 127.0.0.2 reaches
an app listening on 127.0.0.1 and the app sees the peer 127.0.0.2: a second machine, as far as
the per-client share can tell. The relay copies bytes both ways and adds nothing (a client's own
headers, X-Forwarded-For included, pass through as they were written).
"""
from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from typing import Iterator


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def relay_from(source_ip: str, target_port: int) -> Iterator[str]:
    """Listen on a free 127.0.0.1 port; connect each accepted client to 127.0.0.1:`target_port` from
    `source_ip`. Yields the relay's base URL (`http://127.0.0.1:PORT/`)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    open_sockets: list[socket.socket] = [listener]

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket()
            try:
                upstream.bind((source_ip, 0))
                upstream.connect(("127.0.0.1", target_port))
            except OSError:
                client.close()
                upstream.close()
                continue
            open_sockets.extend((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        for sock in open_sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() and the pipes
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass
