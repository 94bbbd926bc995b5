"""How many tool calls run at once on a public deployment: at most `client_tool_calls` for one client (its
address, as the engine shares count it: lab.ui.shell.proxies) and `tool_calls` in all (lab/public_limits.yaml);
a call past either is refused in one line at once, never queued behind the others."""
from __future__ import annotations

import threading
from collections import Counter
from contextlib import contextmanager
from typing import Iterator

from lab.errors import LabError
from lab.visitors import public_limit


class ToolGate:
    """Counts the tool calls running now, per client and in all."""

    def __init__(self, per_client: int | None = None, total: int | None = None) -> None:
        self.per_client = int(public_limit("client_tool_calls")) if per_client is None else per_client
        self.total = int(public_limit("tool_calls")) if total is None else total
        self._running: Counter[str] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def enter(self, client: str | None) -> Iterator[None]:
        """Hold one slot of `client` (None: an unknown client, counted as one) while the call runs."""
        key = client or "unknown"
        with self._lock:
            if self._running[key] >= self.per_client:
                raise LabError(f"one client may run at most {self.per_client} tool calls at once; wait for one "
                               "to finish")
            if sum(self._running.values()) >= self.total:
                raise LabError(f"this server runs {self.total} tool calls at once already; try again shortly")
            self._running[key] += 1
        try:
            yield
        finally:
            with self._lock:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
