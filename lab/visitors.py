"""Per-visitor state of a public deployment: who added which engine, each session's Stop.

Gradio tells every event handler its session (`gr.Request.session_hash`, also available to
helpers through Gradio's request context). In public mode the engines a visitor adds belong
to that visitor's session only: other visitors never see, pay for or unload them, and each
session may hold at most `per_session` of them, all sessions of one client (its IP as Gradio
reports it; lab.ui.shell.proxies says which forwarded header it believes) at most `per_client`, and a
session that neither adds an engine nor generates for `idle_s` seconds loses its engines (limits:
public_limits.yaml). The owner's engines (given with --engine at
start) are shown to everybody and only the owner can remove them (by restarting the lab).
Code outside any request (start-up, background warming) acts as the owner.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Collection, Iterator

import yaml

from lab.errors import LabError
from lab.settings import env

LIMITS_FILE = Path(__file__).with_name("public_limits.yaml")
LIMIT_ENV = {"session_engines": "LAB_SESSION_MAX_ENGINES", "visitor_engines": "LAB_VISITOR_MAX_ENGINES",
             "client_engines": "LAB_CLIENT_MAX_ENGINES", "client_vllm_share": "LAB_CLIENT_VLLM_SHARE",
             "idle_unload_s": "LAB_VISITOR_IDLE_S",
             "sweep_every_s": "LAB_VISITOR_SWEEP_S", "export_max_age_s": "LAB_EXPORT_MAX_AGE_S",
             "stats_at_once": "LAB_STATS_AT_ONCE", "client_stats": "LAB_CLIENT_STATS",
             "client_stats_per_min": "LAB_CLIENT_STATS_PER_MIN", "stats_wait_s": "LAB_STATS_WAIT_S",
             "stats_handlers": "LAB_STATS_HANDLERS",
             "client_tool_calls": "LAB_CLIENT_TOOL_CALLS", "tool_calls": "LAB_TOOL_CALLS"}


@lru_cache(maxsize=1)
def _file_limits() -> dict:
    return yaml.safe_load(LIMITS_FILE.read_text(encoding="utf-8"))


def public_limit(key: str) -> float:
    """One limit of public_limits.yaml, or its environment override when that is a number >= 0."""
    default = float(_file_limits()[key])
    try:
        value = max(0.0, float(env(LIMIT_ENV[key], default)))
    except ValueError:
        return default
    if value != value or value == float("inf"):  # nan, inf: not a limit
        return default
    return min(value, 1.0) if key == "client_vllm_share" else value


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
        self._seen: dict[str, float] = {}  # session -> time it last used its engines (an add, a generation)
        self._pending: dict[str, int] = {}  # session -> engines being added right now
        self._lock = threading.Lock()

    def used(self, session: str | None) -> None:
        """`session` used its engines (a generation; an add counts in `add`): they are not idle.
        Other requests (step switches, status polls) do not count, so a script pinging the page
        cannot hold them. A session holding no engine leaves no trace."""
        if not session:
            return
        with self._lock:
            if self._by_session.get(session):
                self._seen[session] = time.monotonic()

    def idle_sessions(self, now: float | None = None) -> list[str]:
        """Sessions holding engines that did not use them (`used`) for `idle_s` seconds."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._forget_empty()
            return [s for s, names in self._by_session.items()
                    if names and now - self._seen.get(s, now) >= self.idle_s]

    def _forget_empty(self) -> None:
        """Drop what is kept about sessions that hold nothing (scripts can make any number of them)."""
        for table in (self._client, self._seen, self._by_session):
            for session in [s for s in table if not self._by_session.get(s) and not self._pending.get(s)]:
                del table[session]

    def _client_count(self, client: str | None) -> int:
        if not client:
            return 0
        return sum(len(self._by_session.get(s, ())) + self._pending.get(s, 0) for s, c in self._client.items() if c == client)

    def client_of(self, session: str) -> str | None:
        """The client `session` is counted under (its first one), once it checked for room."""
        with self._lock:
            return self._client.get(session)

    def is_visitor_engine(self, name: str) -> bool:
        with self._lock:
            return bool(self._holders.get(name))

    def visible(self, names: list[str], session: str | None, by_visitors: Collection[str] = ()) -> list[str]:
        """The owner's engines and `session`'s own, in pool order. `by_visitors`: the engines
        visitors added; one that another visitor is adding right now has no holder yet, and is
        still not the owner's."""
        with self._lock:
            mine = set(self._by_session.get(session, ())) if session else set()
            return [n for n in names if n in mine or not (self._holders.get(n) or n in by_visitors)]

    def owns(self, session: str | None, name: str) -> bool:
        with self._lock:
            return bool(session) and name in self._by_session.get(session, ())

    def check_room(self, session: str, client: str | None = None) -> None:
        """LabError when `session`, its `client` (its first one is kept) or all visitors together
        hold as many engines as allowed (engines being added right now, `reserve`d, count as held)."""
        with self._lock:
            if client:
                self._client.setdefault(session, client)
            self._check_room(session)

    def _check_room(self, session: str) -> None:
        if len(self._by_session.get(session, ())) + self._pending.get(session, 0) >= self.per_session:
            raise LabError(
                f"a visitor can add at most {self.per_session} engine columns; unload one in the Engines tab first"
            )
        client = self._client.get(session)
        if client and self._client_count(client) >= self.per_client:
            raise LabError(f"one client can hold at most {self.per_client} visitor engines (all its sessions "
                           "together); unload one in the Engines tab first")
        if len(self._holders) + sum(self._pending.values()) >= self.total:
            raise LabError("this server holds as many visitor engines as it allows; try again later")

    @contextmanager
    def reserve(self, session: str, client: str | None = None) -> Iterator[None]:
        """Check the room and hold one slot for `session` (of `client`) while its engine is being
        added, so requests sent at the same moment cannot all pass the check (LabError: no room)."""
        with self._lock:
            if client:
                self._client.setdefault(session, client)
            self._check_room(session)
            self._pending[session] = self._pending.get(session, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._pending[session] -= 1
                if not self._pending[session]:
                    del self._pending[session]

    def add(self, session: str, name: str) -> None:
        with self._lock:
            if name not in self._by_session[session]:
                self._by_session[session].append(name)
                self._holders[name].add(session)
            self._seen[session] = time.monotonic()  # an add is use; an engine is never held without a clock

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


class StatsLimits:
    """How much statistics visitors may start (public_limits.yaml). A computation nobody has made yet waits for
    one of `at_once` turns (at most `wait_s`); one client may have `per_client` computing or waiting and start
    `per_minute` in a minute. What is already computed costs nothing and is never limited (the caller enters
    `admit` only to compute); the owner (no client) is never limited. Re-entered in one thread, it admits once."""

    def __init__(self, at_once: int | None = None, per_client: int | None = None, per_minute: int | None = None,
                 wait_s: float | None = None) -> None:
        self.at_once = max(1, int(public_limit("stats_at_once") if at_once is None else at_once))
        self.per_client = int(public_limit("client_stats") if per_client is None else per_client)
        self.per_minute = int(public_limit("client_stats_per_min") if per_minute is None else per_minute)
        self.wait_s = public_limit("stats_wait_s") if wait_s is None else wait_s
        self._turns = threading.Semaphore(self.at_once)
        self._lock = threading.Lock()
        self._busy: dict[str, int] = defaultdict(int)
        self._started: dict[str, deque] = defaultdict(deque)
        self._inside = threading.local()

    def _enter(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            if self._busy[client] >= self.per_client:
                raise LabError(f"statistics: one visitor may have at most {self.per_client} computations running or "
                               "waiting; wait for them to finish")
            started = self._started[client]
            while started and now - started[0] > 60:
                started.popleft()
            if len(started) >= self.per_minute:
                raise LabError(f"statistics: at most {self.per_minute} new computations a minute per visitor; try "
                               f"again in {60 - (now - started[0]):.0f} s")
            started.append(now)
            self._busy[client] += 1

    def _leave(self, client: str) -> None:
        with self._lock:
            self._busy[client] -= 1
            if not self._busy[client]:
                del self._busy[client]

    @contextmanager
    def admit(self, client: str | None, turn: bool = True) -> Iterator[None]:
        """Enter around one computation for `client` (LabError when its share is used up or no turn comes).
        `turn=False`: a computation of bounded cost (two runs compared) counts against the client's shares but
        does not queue behind the one-against-many computations."""
        if client is None or getattr(self._inside, "on", False):
            yield
            return
        self._enter(client)
        try:
            if turn and not self._turns.acquire(timeout=self.wait_s):
                raise LabError("statistics: the server is busy computing for other visitors; try again in a minute")
            self._inside.on = True
            try:
                yield
            finally:
                self._inside.on = False
                if turn:
                    self._turns.release()
        finally:
            self._leave(client)
