"""Per-visitor state of a public deployment: who added which engine, each session's Stop.

Gradio tells every event handler its session (`gr.Request.session_hash`, also available to
helpers through Gradio's request context). In public mode the engines a visitor adds belong
to that visitor's session only: other visitors never see, pay for or unload them, and each
session may hold at most `per_session` of them (LAB_SESSION_MAX_ENGINES, default 6). The
owner's engines (given with --engine at start) are shown to everybody and only the owner can
remove them (by restarting the lab). Code outside any request (start-up, background warming)
acts as the owner.
"""
from __future__ import annotations

import os
import threading
from collections import defaultdict

from lab.errors import LabError

DEFAULT_SESSION_ENGINES = 6
DEFAULT_VISITOR_ENGINES = 120


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, default)))
    except ValueError:
        return default


def current_session() -> str | None:
    """The Gradio session of the request being handled, or None outside a request."""
    try:
        from gradio.context import LocalContext
    except ImportError:  # the CLI never imports Gradio
        return None
    request = LocalContext.request.get(None)
    return getattr(request, "session_hash", None) if request is not None else None


class SessionEngines:
    """Which pool engines each visitor session added (engines nobody added are the owner's)."""

    def __init__(self, per_session: int | None = None, total: int | None = None) -> None:
        self.per_session = _env_int("LAB_SESSION_MAX_ENGINES", DEFAULT_SESSION_ENGINES) if per_session is None else per_session
        self.total = _env_int("LAB_VISITOR_MAX_ENGINES", DEFAULT_VISITOR_ENGINES) if total is None else total
        self._by_session: dict[str, list[str]] = defaultdict(list)
        self._holders: dict[str, set[str]] = defaultdict(set)
        self._lock = threading.Lock()

    def is_visitor_engine(self, name: str) -> bool:
        with self._lock:
            return bool(self._holders.get(name))

    def visible(self, names: list[str], session: str | None) -> list[str]:
        """The owner's engines and `session`'s own, in pool order."""
        with self._lock:
            mine = set(self._by_session.get(session, ())) if session else set()
            return [n for n in names if not self._holders.get(n) or n in mine]

    def owns(self, session: str | None, name: str) -> bool:
        with self._lock:
            return bool(session) and name in self._by_session.get(session, ())

    def check_room(self, session: str) -> None:
        """LabError when `session` (or all visitors together) hold as many engines as allowed."""
        with self._lock:
            if len(self._by_session.get(session, ())) >= self.per_session:
                raise LabError(
                    f"a visitor can add at most {self.per_session} engine columns; unload one in the Engines tab first"
                )
            if len(self._holders) >= self.total:
                raise LabError("this server holds as many visitor engines as it allows; try again later")

    def add(self, session: str, name: str) -> None:
        with self._lock:
            if name not in self._by_session[session]:
                self._by_session[session].append(name)
                self._holders[name].add(session)

    def release(self, session: str, name: str) -> bool:
        """Drop `session`'s hold on `name`; True when no session holds it any more."""
        with self._lock:
            if name in self._by_session.get(session, ()):
                self._by_session[session].remove(name)
            holders = self._holders.get(name, set())
            holders.discard(session)
            if not holders:
                self._holders.pop(name, None)
                return True
            return False

    def end(self, session: str) -> list[str]:
        """Forget a closed session; returns the engines nobody holds any more."""
        with self._lock:
            names = list(self._by_session.pop(session, ()))
        return [n for n in names if self.release(session, n)]


class SessionEvents:
    """One `threading.Event` per session (e.g. the Batch tab's Stop), so a press stops only
    that session's work."""

    def __init__(self) -> None:
        self._events: dict[str | None, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, session: str | None) -> threading.Event:
        with self._lock:
            return self._events.setdefault(session, threading.Event())

    def end(self, session: str | None) -> None:
        with self._lock:
            event = self._events.pop(session, None)
        if event is not None:
            event.set()
