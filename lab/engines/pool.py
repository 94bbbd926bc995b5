"""`EnginePool`: several engines side by side, loaded in the background, generating concurrently.

An engine that fails to load is shown as `failed` with its reason; one that raises while
generating gets the error in each of its completions. Neither stops the other engines.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from lab.engines.base import Completion, Request, Sampling
from lab.engines.common import EngineBase
from lab.engines.presets import Preset
from lab.engines.registry import create_engine, resolve_spec
from lab.errors import EngineSpecError, LabError

LOADING, READY, FAILED = "loading", "ready", "failed"
PUBLIC_KINDS = ("reference", "stored")

Requests = list[Request] | Mapping[str, list[Request]] | Callable[[EngineBase], list[Request]]
PoolOnDone = Callable[[str, int, Completion], None]


def one_line(exc: BaseException) -> str:
    """A traceback-free message: LabErrors as written, others as `Type: first line`."""
    text = str(exc).strip()
    if isinstance(exc, LabError):
        return text or type(exc).__name__
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


@dataclass
class Slot:
    """One engine in the pool and its loading state."""

    name: str
    spec: str
    engine: EngineBase
    state: str = LOADING
    error: str | None = None
    removed: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)


class EnginePool:
    """Thread-safe set of named engines.

    `allow_loading=False` (a public Space) admits only `reference` and `stored:` files inside
    `data_roots` (the results folders)."""

    def __init__(
        self,
        *,
        allow_loading: bool = True,
        data_roots: list[str | Path] | tuple = (),
        presets: dict[str, Preset] | None = None,
        admission=None,
    ) -> None:
        self.allow_loading = allow_loading
        self.admission = admission  # lab.engines.admission.Admission; overrides the checks below
        self.data_roots = [Path(p).expanduser().resolve() for p in data_roots]
        self.presets = presets
        self._slots: dict[str, Slot] = {}
        self._lock = threading.RLock()

    # --- admission -------------------------------------------------------------------
    def check_allowed(self, spec: str) -> None:
        """Raise EngineSpecError when this pool may not load `spec` (public mode)."""
        if self.admission is not None:
            self.admission.check(resolve_spec(spec, self.presets))
            return
        if self.allow_loading:
            return
        config = resolve_spec(spec, self.presets)
        if config.kind not in PUBLIC_KINDS:
            raise EngineSpecError(
                f"loading '{config.kind}' engines is disabled on this server; only reference and "
                "stored:RESULT_FILE are allowed (the owner can enable engines with LAB_ALLOW_ENGINES=1)"
            )
        if config.kind == "stored":
            path = Path(config.target).expanduser().resolve()
            if not any(path == root or root in path.parents for root in self.data_roots):
                raise EngineSpecError(
                    f"stored file '{config.target}' is outside the data folders "
                    f"({', '.join(str(r) for r in self.data_roots) or 'none configured'})"
                )

    def _unique_name(self, wanted: str, kind: str) -> str:
        """`wanted`, else `wanted · kind` (a stored `reference.json` beside the reference
        engine), else numbered."""
        if wanted not in self._slots:
            return wanted
        name, n = f"{wanted} · {kind}", 2
        while name in self._slots:
            name, n = f"{wanted} · {kind} ({n})", n + 1
        return name

    # --- membership ------------------------------------------------------------------
    def add(self, spec: str, name: str | None = None, **overrides) -> str:
        """Create the engine for `spec` and load it in a background thread; return its name.

        Bad specs and disallowed engines raise EngineSpecError at once; load failures show up
        in `status()` as state `failed` with the reason."""
        self.check_allowed(spec)
        engine = create_engine(spec, presets=self.presets, **overrides)
        with self._lock:
            slot_name = self._unique_name(name or engine.name, engine.kind)
            engine.name = slot_name
            slot = Slot(name=slot_name, spec=spec, engine=engine)
            slot.thread = threading.Thread(target=self._load, args=(slot,), name=f"load-{slot_name}", daemon=True)
            self._slots[slot_name] = slot
        slot.thread.start()
        return slot_name

    def _load(self, slot: Slot) -> None:
        try:
            slot.engine.load()
        except BaseException as exc:  # noqa: BLE001 - anything a loader raises is shown, not thrown
            with self._lock:
                slot.state, slot.error = FAILED, one_line(exc)
            return
        with self._lock:
            slot.state = READY
            close_now = slot.removed
        if close_now:  # removed while loading
            slot.engine.close()

    def wait(self, names: list[str] | None = None, timeout: float | None = None) -> bool:
        """Wait until the named (default: all) engines finished loading; True if none is loading."""
        with self._lock:
            slots = [self._slots[n] for n in (names or list(self._slots)) if n in self._slots]
        for slot in slots:
            if slot.thread is not None:
                slot.thread.join(timeout)
        return all(slot.state != LOADING for slot in slots)

    def remove(self, name: str) -> None:
        """Close the engine and forget it (an engine still loading is closed when it finishes)."""
        with self._lock:
            slot = self._slots.pop(name, None)
            if slot is None:
                raise EngineSpecError(f"no engine named '{name}' in the pool")
            slot.removed = True
            loaded = slot.state == READY
        if loaded:
            slot.engine.close()

    def get(self, name: str) -> EngineBase:
        """The engine named `name` (whatever its state; see `state(name)`)."""
        with self._lock:
            slot = self._slots.get(name)
        if slot is None:
            raise EngineSpecError(f"no engine named '{name}' in the pool; engines: {', '.join(self.names()) or 'none'}")
        return slot.engine

    def state(self, name: str) -> str:
        with self._lock:
            slot = self._slots.get(name)
            return slot.state if slot else "absent"

    def names(self, state: str | None = None) -> list[str]:
        with self._lock:
            return [n for n, s in self._slots.items() if state is None or s.state == state]

    def status(self) -> list[dict]:
        """One row per engine: name, spec, kind, model, state, error, device, memory_gb, lora."""
        with self._lock:
            slots = list(self._slots.values())
        rows = []
        for slot in slots:
            info = None
            if slot.state == READY:
                try:
                    info = slot.engine.describe()
                except Exception:  # noqa: BLE001 - a status row must never fail
                    info = None
            rows.append(
                {
                    "name": slot.name,
                    "spec": slot.spec,
                    "kind": slot.engine.kind,
                    "model": slot.engine.model_id,
                    "state": slot.state,
                    "error": slot.error,
                    "device": info.device if info else None,
                    "memory_gb": info.memory_gb if info else None,
                    "lora": info.lora if info else getattr(slot.engine, "lora", None),
                }
            )
        return rows

    # --- generation ------------------------------------------------------------------
    def generate_all(
        self,
        names: list[str],
        requests: Requests,
        sampling_by_engine: Mapping[str, Sampling] | Sampling | None = None,
        on_done: PoolOnDone | None = None,
    ) -> dict[str, list[Completion]]:
        """Run each named engine in its own thread on its requests; return name -> completions.

        `requests` is one list for all, a mapping name -> list (prompts rendered per engine),
        or a function engine -> list. Sampling defaults to each engine's `default_sampling`.
        `on_done(engine_name, index, completion)` is called as each answer arrives."""
        results: dict[str, list[Completion]] = {}
        threads = []
        for name in names:
            thread = threading.Thread(
                target=self._run_one, args=(name, requests, sampling_by_engine, on_done, results),
                name=f"generate-{name}", daemon=True,
            )
            threads.append(thread)
            thread.start()
        for thread in threads:
            thread.join()
        return results

    def _requests_for(self, name: str, engine: EngineBase | None, requests: Requests) -> list[Request]:
        if isinstance(requests, Mapping):
            return list(requests.get(name, []))
        if callable(requests):
            return list(requests(engine)) if engine is not None else []
        return list(requests)

    def _run_one(self, name, requests, sampling_by_engine, on_done, results) -> None:
        with self._lock:
            slot = self._slots.get(name)
        engine = slot.engine if slot else None
        completions: list[Completion] = []
        try:
            todo = self._requests_for(name, engine, requests)
        except Exception as exc:  # noqa: BLE001 - e.g. prompt rendering failed for this engine
            results[name] = [Completion(text="", error=f"could not prepare requests: {one_line(exc)}")]
            return
        if slot is None or slot.state != READY:
            why = "not in the pool" if slot is None else f"{slot.state}" + (f": {slot.error}" if slot.error else "")
            completions = [Completion(text="", error=f"engine '{name}' is not ready ({why})") for _ in todo]
            for i, completion in enumerate(completions):
                self._notify(on_done, name, i, completion)
            results[name] = completions
            return
        if isinstance(sampling_by_engine, Sampling):
            sampling = sampling_by_engine
        else:
            sampling = (sampling_by_engine or {}).get(name) or engine.default_sampling

        def report(index: int, completion: Completion) -> None:
            self._notify(on_done, name, index, completion)

        try:
            completions = engine.generate(todo, sampling, on_done=report)
        except BaseException as exc:  # noqa: BLE001 - an engine's crash stays with that engine
            message = f"engine '{name}' failed: {one_line(exc)}"
            completions = [Completion(text="", error=message) for _ in todo]
            for i, completion in enumerate(completions):
                report(i, completion)
        results[name] = completions

    @staticmethod
    def _notify(on_done: PoolOnDone | None, name: str, index: int, completion: Completion) -> None:
        if on_done is None:
            return
        try:
            on_done(name, index, completion)
        except Exception:  # noqa: BLE001 - a UI callback error must not stop generation
            pass

    def close_all(self) -> None:
        """Close every engine (e.g. when the app shuts down)."""
        for name in self.names():
            try:
                self.remove(name)
            except LabError:
                pass
