"""Per-visitor state of a public deployment: who added which engine, each session's Stop.

Gradio tells every event handler its session (`gr.Request.session_hash`, also available to
helpers through Gradio's request context). In public mode the engines a visitor adds belong
to that visitor's session only: other visitors never see, pay for or unload them, and each
session may hold at most `per_session` of them, all sessions of one client (its IP as Gradio
reports it) at most `per_client`, and a session that makes no request for `idle_s` seconds
loses its engines (limits: public_limits.yaml). The owner's engines (given with --engine at
start) are shown to everybody and only the owner can remove them (by restarting the lab).
Code outside any request (start-up, background warming) acts as the owner.
"""
from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import yaml

from lab.errors import LabError

LIMITS_FILE = Path(__file__).with_name("public_limits.yaml")
LIMIT_ENV = {"session_engines": "LAB_SESSION_MAX_ENGINES", "visitor_engines": "LAB_VISITOR_MAX_ENGINES",
             "client_engines": "LAB_CLIENT_MAX_ENGINES", "idle_unload_s": "LAB_VISITOR_IDLE_S",
             "sweep_every_s": "LAB_VISITOR_SWEEP_S"}


@lru_cache(maxsize=1)
def _file_limits() -> dict:
    return yaml.safe_load(LIMITS_FILE.read_text(encoding="utf-8"))


def public_limit(key: str) -> float:
    """One limit of public_limits.yaml, or its environment override when that is a number >= 0."""
    default = float(_file_limits()[key])
    try:
        return max(0.0, float(os.environ.get(LIMIT_ENV[key], default)))
    except ValueError:
        return default


def current_client() -> str | None:
    """The client address (IP as Gradio reports it) of the request being handled, or None."""
    try:
        from gradio.context import LocalContext
    except ImportError:
        return None
    request = LocalContext.request.get(None)
    client = getattr(request, "client", None) if request is not None else None
    return getattr(client, "host", None) if client is not None else None


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

    def __init__(self, per_session: int | None = None, total: int | None = None, per_client: int | None = None,
                 idle_s: float | None = None) -> None:
        self.per_session = int(public_limit("session_engines")) if per_session is None else per_session
        self.total = int(public_limit("visitor_engines")) if total is None else total
        self.per_client = int(public_limit("client_engines")) if per_client is None else per_client
        self.idle_s = public_limit("idle_unload_s") if idle_s is None else idle_s
        self._by_session: dict[str, list[str]] = defaultdict(list)
        self._holders: dict[str, set[str]] = defaultdict(set)
        self._client: dict[str, str] = {}  # session -> client address
        self._seen: dict[str, float] = {}  # session -> time of its last request
        self._lock = threading.Lock()

    def touch(self, session: str | None, client: str | None = None) -> None:
        """`session` made a request (from `client`): its engines are not idle."""
        if not session:
            return
        with self._lock:
            self._seen[session] = time.monotonic()
            if client:
                self._client.setdefault(session, client)

    def idle_sessions(self, now: float | None = None) -> list[str]:
        """Sessions holding engines that made no request for `idle_s` seconds."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return [s for s, names in self._by_session.items()
                    if names and now - self._seen.get(s, now) >= self.idle_s]

    def _client_count(self, client: str | None) -> int:
        if not client:
            return 0
        return sum(len(self._by_session.get(s, ())) for s, c in self._client.items() if c == client)

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
            client = self._client.get(session)
            if client and self._client_count(client) >= self.per_client:
                raise LabError(f"one client can hold at most {self.per_client} visitor engines (all its sessions "
                               "together); unload one in the Engines tab first")
            if len(self._holders) >= self.total:
                raise LabError("this server holds as many visitor engines as it allows; try again later")

    def add(self, session: str, name: str) -> None:
        with self._lock:
            if name not in self._by_session[session]:
                self._by_session[session].append(name)
                self._holders[name].add(session)
            self._seen.setdefault(session, time.monotonic())  # an engine is never held without a clock

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
            self._seen.pop(session, None)
            self._client.pop(session, None)
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
