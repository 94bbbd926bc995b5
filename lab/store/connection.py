"""Short-lived DuckDB connections, so that several processes can share one results store.

DuckDB lets one process at a time open a database file read-write (any number may open it
read-only, but only while nobody writes). The lab therefore never keeps the file open: a
`Connector` opens it for an operation (or a burst of operations from several threads), keeps it
a `linger` after the last one (or until another process asks for it), then closes it and so
releases the file lock. Another process that finds the file locked leaves a `.waiting` marker
beside it, which makes an idle holder let go at once, and retries with backoff until `timeout`.

Reads are cached in-process (`ReadCache`), keyed by the SQL, its parameters and the store's
*generation*: this process's write counter plus the size and mtime of the database file and
its WAL. A write by any process changes the generation, so a cached answer is never stale.
"""
from __future__ import annotations

import atexit
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

import cachetools
import duckdb

from lab.errors import LabError
from lab.security.safe_files import LinkRefused, touch
from lab.settings import env_number

DEFAULT_LINGER_SEC = 10.0
_POLL_SEC = 0.05
_MARKER_FRESH_SEC = 2.0
DEFAULT_TIMEOUT_SEC = 30.0
_BACKOFF_START, _BACKOFF_MAX = 0.01, 0.25
_OPEN: "weakref.WeakSet[Connector]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """Close every file still open when the process exits (a clean checkpoint, no leaked handles)."""
    for connector in list(_OPEN):
        try:
            connector.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether `exc` says another process holds the database file."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.IOException) and ("lock" in text or "conflicting" in text)


class Connector:
    """Opens one DuckDB file on demand for this process's threads, and closes it when idle."""

    def __init__(self, path: str | Path, *, linger: float | None = None, timeout: float | None = None) -> None:
        self.path = Path(path)
        self.linger = env_number("LAB_DB_LINGER", DEFAULT_LINGER_SEC) if linger is None else linger
        self.timeout = env_number("LAB_DB_TIMEOUT", DEFAULT_TIMEOUT_SEC) if timeout is None else timeout
        self._con: duckdb.DuckDBPyConnection | None = None
        self._users = 0
        self._last_use = 0.0
        self._writes = 0
        self._lock = threading.Lock()
        self._closer: threading.Thread | None = None
        self.opens = 0  # how many times the file was opened (for tests and benchmarks)
        _OPEN.add(self)

    # -- opening and closing ----------------------------------------------------------------
    @property
    def waiting_marker(self) -> Path:
        """A file a process creates while it waits for the database: holders let go at once."""
        return self.path.with_name(self.path.name + ".waiting")

    def _open(self) -> duckdb.DuckDBPyConnection:
        """duckdb.connect, retrying with backoff while another process holds the file (and
        asking it, through `waiting_marker`, to close the file as soon as it is idle)."""
        deadline = time.monotonic() + self.timeout
        delay = _BACKOFF_START
        marked = False
        try:
            while True:
                try:
                    con = duckdb.connect(str(self.path))
                    self.opens += 1
                    return con
                except duckdb.IOException as exc:
                    if not is_lock_conflict(exc):
                        raise LabError(f"cannot open the results database {self.path.name}: {exc}") from None
                    if time.monotonic() >= deadline:
                        raise LabError(
                            f"the results database {self.path.name} stayed busy for {self.timeout:.0f} s (another "
                            "lab process is using it); try again, or raise LAB_DB_TIMEOUT"
                        ) from None
                try:
                    touch(self.waiting_marker)  # refreshed while waiting; a stale one is ignored; never through a link
                    marked = True
                except (OSError, LinkRefused):
                    pass
                time.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)
        finally:
            if marked:
                self.waiting_marker.unlink(missing_ok=True)

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on the open file (opening it if needed); the file stays open while any is in use."""
        with self.hold():
            with self._con.cursor() as cur:
                yield cur

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the file open (and other processes out) for the whole block, e.g. an import."""
        with self._lock:
            if self._con is None:
                self._con = self._open()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                self._last_use = time.monotonic()
                self._schedule_close()

    def _schedule_close(self) -> None:
        if self._users or self._con is None:
            return
        if self.linger <= 0:
            self._close_now()
            return
        if self._closer is None or not self._closer.is_alive():
            self._closer = threading.Thread(target=self._close_when_idle, name="lab-store-closer", daemon=True)
            self._closer.start()

    def _close_when_idle(self) -> None:
        while True:
            time.sleep(min(_POLL_SEC, self.linger))
            with self._lock:
                if self._con is None:
                    return
                if self._users:
                    continue
                if time.monotonic() - self._last_use >= self.linger or self._someone_waits():
                    self._close_now()
                    return

    def _someone_waits(self) -> bool:
        try:
            return time.time() - self.waiting_marker.stat().st_mtime < _MARKER_FRESH_SEC
        except OSError:
            return False

    def let_waiters_in(self, pause: float = 0.3) -> bool:
        """Between the steps of a long job: when another process waits for the file and nothing
        here uses it, close it and pause so that process gets its turn. True when it did."""
        with self._lock:
            if self._users or self._con is None or not self._someone_waits():
                return False
            self._close_now()
        time.sleep(pause)
        return True

    def _close_now(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def close(self) -> None:
        """Close the file now (cursors still in use keep working until they finish)."""
        with self._lock:
            if self._users == 0:
                self._close_now()

    @property
    def is_open(self) -> bool:
        return self._con is not None

    # -- generations ------------------------------------------------------------------------
    def wrote(self) -> None:
        """Note a write by this process (cached reads from before it are stale)."""
        with self._lock:
            self._writes += 1

    def generation(self) -> tuple:
        """Changes whenever any process changed the file: our write count + file and WAL stat."""
        parts: list[Any] = [self._writes]
        for p in (self.path, self.path.with_name(self.path.name + ".wal")):
            try:
                st = p.stat()
                parts += [st.st_size, st.st_mtime_ns]
            except OSError:
                parts += [None, None]
        return tuple(parts)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    hash(value)
    return value


class ReadCache:
    """Answers of read queries, valid while the store's generation is unchanged (a `cachetools` LRU map)."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._data: cachetools.LRUCache = cachetools.LRUCache(maxsize=capacity)
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get_or_run(self, kind: str, sql: str, params: Any, generation: tuple, run: Callable[[], Any]) -> Any:
        """The cached answer of (kind, sql, params) at `generation`, else `run()` (and cache it)."""
        try:
            key = (kind, sql, _freeze(params))
        except TypeError:  # unhashable parameter: do not cache
            return run()
        with self._lock:
            hit = self._data.get(key)  # a hit makes the key the most recent
            if hit is not None and hit[0] == generation:
                self.hits += 1
                return hit[1]
        self.misses += 1
        value = run()
        with self._lock:
            self._data[key] = (generation, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
