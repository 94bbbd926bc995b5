"""The app's background filler of pending equiv_f1 columns: a daemon thread per store.

Imports into a store opened with `defer_equiv` leave a run's equiv columns pending and `kick()`
this filler; a kick also sets pending again the runs another process filled without this store's replay
(lab.store.equiv_fill.refill_stale), e.g. a `python -m lab results import` while the app runs. It starts once imports have settled (no kick for `settle` seconds, so a burst of
imports is not slowed by it), fills run after run (lab.store.equiv_fill), and pauses when a new
import arrives. Another process that waits for the file gets it between runs.
"""
from __future__ import annotations

import logging
import threading
import time

import duckdb

from lab.errors import LabError
from lab.store.db import Store
from lab.store.equiv_fill import fill_pending, refill_stale

DEFAULT_SETTLE_SEC = 0.5
log = logging.getLogger(__name__)


class EquivFiller:
    """Fills one store's pending equiv columns in the background; `kick()` after an import."""

    def __init__(self, store: Store, settle: float = DEFAULT_SETTLE_SEC) -> None:
        self.store = store
        self.settle = settle
        self.filled = 0  # runs this filler filled
        self.error: str | None = None  # the last store problem (it retries on the next kick)
        self._kicked = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = threading.Event()
        self._last_kick = 0.0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @classmethod
    def attach(cls, store: Store, settle: float = DEFAULT_SETTLE_SEC) -> "EquivFiller":
        """A filler for `store`, set as its `equiv_filler` (imports then leave equiv pending), started."""
        filler = cls(store, settle)
        store.defer_equiv, store.equiv_filler = True, filler
        filler.kick()
        return filler

    def kick(self) -> None:
        """Something may be pending: fill it once imports have settled."""
        with self._lock:
            self._last_kick = time.monotonic()
            self._idle.clear()
            self._kicked.set()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="lab-equiv-filler", daemon=True)
                self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing is left to fill (or `timeout`); True when idle."""
        return self._idle.wait(timeout)

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    def stop(self) -> None:
        """Stop after the run being filled (a stopped filler is not restarted by `kick`)."""
        self._stop.set()
        self._kicked.set()

    def _run(self) -> None:
        while True:
            self._wait_for_quiet()
            self._kicked.clear()
            try:
                # runs another process filled without this store's replay (or with another) are filled again
                # with it first: one equiv_f1 per step, the one Compare computes
                refill_stale(self.store)
                self.filled += fill_pending(self.store, should_stop=self._interrupted)
                self.error = None
            except (LabError, duckdb.Error) as exc:  # the file stayed busy, …: tried again on the next kick
                self.error = str(exc)
                log.warning("equiv_f1 fill paused: %s", exc)
            except Exception as exc:  # noqa: BLE001 - a background thread must not die silently
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("equiv_f1 fill failed: %s", self.error)
            with self._lock:
                if not self._kicked.is_set() or self._stop.is_set():
                    self._idle.set()
                    self._thread = None  # the next kick starts a new thread
                    return

    def _wait_for_quiet(self) -> None:
        while not self._stop.is_set():
            left = self._last_kick + self.settle - time.monotonic()
            if left <= 0:
                return
            time.sleep(left)

    def _interrupted(self) -> bool:
        """A new import (or stop) arrived: pause until imports settle again."""
        return self._stop.is_set() or self._kicked.is_set()
