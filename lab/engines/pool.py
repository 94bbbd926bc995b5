"""`EnginePool`: several engines side by side, loaded in the background, generating concurrently.

An engine that fails to load is shown as `failed` with its reason; one that raises while
generating gets the error in each of its completions. Neither stops the other engines.
Managed servers (`vllm:`, `transformers-serve:`) start one at a time, each waiting until it
answers; a server that dies shows as `crashed` with its exit code and log lines, and
`restart(name)` brings it back. vLLM engines share each GPU's memory budget (`add_many`).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from lab.engines.base import Completion, Request, Sampling
from lab.engines.common import EngineBase
from lab.engines.loading import hub_ids_only
from lab.engines.preset_fit import preset_status
from lab.engines.presets import Preset
from lab.engines.registry import ENGINE_KINDS, create_engine, resolve_spec
from lab.errors import EngineSpecError, LabError

LOADING, READY, FAILED, CRASHED = "loading", "ready", "failed", "crashed"

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
    visitor: bool = False  # a public deployment's visitor added it: loaded with hub_ids_only
    client: str | None = None  # that visitor's client (its address): its vLLM memory is capped per client
    facts: dict = field(default_factory=dict)  # its preset's changes and fit, its checkpoint (lab.engines.preset_fit)


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
        self._start_lock = threading.Lock()  # managed servers start one at a time

    # --- admission -------------------------------------------------------------------
    def check_allowed(self, spec: str, visitor: bool = False) -> None:
        """Raise EngineSpecError when this pool may not load `spec` (public mode); `visitor`: a
        visitor of a public deployment asks (see Admission.check)."""
        if self.admission is not None:
            self.admission.check(resolve_spec(spec, self.presets), visitor=visitor)
            return
        if self.allow_loading:
            return
        config = resolve_spec(spec, self.presets)
        cls = ENGINE_KINDS[config.kind]
        if not cls.answers_from_data:
            raise EngineSpecError(
                f"loading '{config.kind}' engines is disabled on this server; only reference and "
                "stored:RESULT_FILE are allowed (the owner can enable engines with LAB_ALLOW_ENGINES=1)"
            )
        if cls.stored_run:
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
    def add(self, spec: str, name: str | None = None, visitor: bool = False, client: str | None = None,
            client_share: float | None = None, **overrides) -> str:
        """Create the engine for `spec` and load it in a background thread; return its name.
        `visitor`: a public deployment's visitor adds it (its ORG/NAME are Hub ids only); `client`
        and `client_share`: see `add_many`.

        Bad specs and disallowed engines raise EngineSpecError at once; load failures show up
        in `status()` as state `failed` with the reason."""
        return self.add_many([spec], [name], visitor=visitor, client=client, client_share=client_share, **overrides)[0]

    def add_many(self, specs: list[str], names: list[str | None] | None = None, visitor: bool = False,
                 client: str | None = None, client_share: float | None = None, **overrides) -> list[str]:
        """Add several engines at once: vLLM engines without their own GPU share split what is
        left of the budget on their GPU. Raises (and adds nothing) when one spec is bad or the
        engines cannot fit. With `client_share` (a visitor of a public deployment, from `client`),
        the vLLM engines of that client hold at most that part of each budget together, their own
        shares (a preset's) cut to it: one visitor never takes the budget others need, and engines
        already running (the owner's) keep theirs."""
        names = list(names or [None] * len(specs))
        for spec in specs:
            self.check_allowed(spec)
        engines = [create_engine(spec, presets=self.presets, **overrides) for spec in specs]
        facts = [preset_status(engine) for engine in engines]
        with self._lock:
            slots = []
            for spec, name, engine, known in zip(specs, names, engines, facts):
                slot_name = self._unique_name(name or engine.name, engine.kind)
                engine.name = slot_name
                slots.append(Slot(name=slot_name, spec=spec, engine=engine, visitor=visitor, client=client,
                                  facts=known))
                self._slots[slot_name] = slots[-1]  # reserved now so names stay unique
            try:
                self._share_gpu_memory([slot.engine for slot in slots], client, client_share)
            except LabError:
                for slot in slots:
                    self._slots.pop(slot.name, None)
                raise
            for slot in slots:
                slot.thread = threading.Thread(target=self._load, args=(slot,), name=f"load-{slot.name}", daemon=True)
        for slot in slots:
            slot.thread.start()
        return [slot.name for slot in slots]

    def _share_gpu_memory(self, new: list[EngineBase], client: str | None = None,
                          client_share: float | None = None) -> None:
        """Give each new vLLM engine without its own share its part of its device's budget: a
        fraction of each GPU it runs on (tensor-parallel engines are charged on every one), or,
        on vLLM's CPU backend, GiB of RAM for its KV cache. With `client_share`, cut to what is left
        of `client`'s part (`client_room`)."""
        from lab.engines.servers.config import server_settings
        from lab.engines.servers.gpu_budget import CPU_KV_BUDGET_HINT, Budget, GpuRequest, split_budget

        wanted = [e for e in new if e.holds_memory_share]
        if not wanted:
            return
        config = server_settings()
        budgets = {
            "gpu": Budget(total=float(config["gpu_memory_budget"]), minimum=float(config["min_gpu_memory_utilization"])),
            "cpu": Budget(total=float(config["cpu_kv_cache_budget_gb"]), minimum=float(config["min_cpu_kv_cache_gb"]),
                          device="CPU (vLLM's CPU backend)", what="GiB of RAM for KV caches", hint=CPU_KV_BUDGET_HINT),
        }
        for pool_name, budget in budgets.items():
            mine = [e for e in wanted if e.memory_pool() == pool_name]
            if not mine:
                continue
            held: dict[int, list[tuple[str, float]]] = {}
            for slot in self._slots.values():
                engine = slot.engine
                if engine in new or not engine.holds_memory_share or slot.state == FAILED:
                    continue
                if engine.memory_pool() == pool_name and engine.memory_share() is not None:
                    for gpu in self._devices(engine, pool_name):
                        held.setdefault(gpu, []).append((slot.name, engine.memory_share()))
            room = self._client_room(mine, pool_name, budget, new, client, client_share)
            for engine in mine:  # a visitor's own share (a preset's) is cut to its client's room
                if room is not None and engine.memory_share() is not None and engine.memory_share() > room[engine.name]:
                    engine.set_memory_share(room[engine.name])
            requests = [GpuRequest(e.name, gpu, e.memory_share()) for e in mine for gpu in self._devices(e, pool_name)]
            shares: dict[str, float] = {}
            for request in requests:  # a tensor-parallel engine gets the smallest of its GPUs' shares
                got = split_budget([r for r in requests if r.gpu == request.gpu], held, kind=budget)[request.name]
                shares[request.name] = min(got, shares.get(request.name, got))
            for engine in mine:
                if engine.memory_share() is None:
                    engine.set_memory_share(min(shares[engine.name], room[engine.name]) if room else shares[engine.name])

    def _client_room(self, mine: list[EngineBase], pool_name: str, budget, new: list[EngineBase],
                     client: str | None, client_share: float | None) -> dict[str, float] | None:
        """Per new engine, the most it may hold so that `client`'s vLLM engines hold at most
        `client_share` of the budget on each of its devices (the new ones split what is left
        equally); None without a `client_share`. GpuBudgetError, naming the client's part and what
        it holds, when that is less than the budget's minimum."""
        from lab.engines.servers.gpu_budget import GpuBudgetError

        if client_share is None:
            return None
        cap = round(float(client_share) * budget.total, 6)
        room: dict[str, float] = {}
        for gpu in sorted({g for e in mine for g in self._devices(e, pool_name)}):
            held = sum(slot.engine.memory_share() or 0.0 for slot in self._slots.values()
                       if slot.client is not None and slot.client == client and slot.engine not in new
                       and slot.state != FAILED and slot.engine.holds_memory_share
                       and slot.engine.memory_pool() == pool_name and gpu in self._devices(slot.engine, pool_name))
            here = [e for e in mine if gpu in self._devices(e, pool_name)]
            each = math.floor((cap - held) / len(here) / budget.step) * budget.step
            if each < budget.minimum:
                device = budget.device.format(gpu=gpu)
                raise GpuBudgetError(
                    f"{device}: the vLLM engines of one visitor (all its sessions) may hold {cap:g} {budget.what} "
                    f"({client_share:.0%} of the lab's budget of {budget.total:g}); yours hold {round(held, 3):g}, "
                    f"leaving less than the {budget.minimum:g} an engine needs. Unload one in the Engines tab first")
            for engine in here:
                room[engine.name] = round(min(room.get(engine.name, each), each), 6)
        return room

    @staticmethod
    def _devices(engine: EngineBase, pool_name: str) -> list[int]:
        return engine.gpu_indices() if pool_name == "gpu" else [0]

    def _load(self, slot: Slot, action: Callable[[], None] | None = None) -> None:
        action = action or slot.engine.load
        try:
            with hub_ids_only(slot.visitor):
                if slot.engine.managed:
                    with self._start_lock:  # one server starts at a time, each until it answers
                        if slot.removed:
                            return
                        action()
                else:
                    action()
        except BaseException as exc:  # noqa: BLE001 - anything a loader raises is shown, not thrown
            with self._lock:
                slot.state, slot.error = FAILED, one_line(exc)
            return
        with self._lock:
            slot.state, slot.error = READY, None
            close_now = slot.removed
        if close_now:  # removed while loading
            slot.engine.close()

    def restart(self, name: str) -> None:
        """Restart a managed engine's server (crashed, failed or running) in the background."""
        with self._lock:
            slot = self._slots.get(name)
            if slot is None:
                raise EngineSpecError(f"no engine named '{name}' in the pool")
            if not slot.engine.managed:
                raise EngineSpecError(f"engine '{name}' ({slot.engine.kind}) runs no server to restart; unload and add it again")
            if slot.state == LOADING:
                raise EngineSpecError(f"engine '{name}' is still starting; wait until it is ready or failed")
            slot.state, slot.error = LOADING, None
            slot.thread = threading.Thread(target=self._load, args=(slot, slot.engine.restart),
                                           name=f"restart-{name}", daemon=True)
        slot.thread.start()

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
            loaded = slot.state == READY or slot.engine.managed
        if loaded:  # a managed engine's server is stopped whatever its state
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
        return self._state_of(slot)[0] if slot else "absent"

    @staticmethod
    def _state_of(slot: Slot) -> tuple[str, str | None]:
        """(state, error): a ready managed engine whose server died is `crashed`, with its exit
        code and log lines as the error."""
        down = slot.engine.server_down() if slot.state == READY else None
        if down is not None:
            return CRASHED, down
        return slot.state, slot.error

    def names(self, state: str | None = None) -> list[str]:
        with self._lock:
            return [n for n, s in self._slots.items() if state is None or s.state == state]

    def status(self) -> list[dict]:
        """One row per engine: name, spec, kind, model, state, error, device, memory_gb, lora, preset,
        server, visitor (a public deployment's visitor added it), and for model engines preset_changes,
        preset_warning and checkpoint (lab.engines.preset_fit.preset_status)."""
        with self._lock:
            slots = list(self._slots.values())
        rows = []
        for slot in slots:
            info = None
            state, error = self._state_of(slot)
            if state == READY:
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
                    "state": state,
                    "error": error,
                    "device": info.device if info else None,
                    "memory_gb": info.memory_gb if info else None,
                    "lora": info.lora if info else slot.engine.lora,
                    "preset": slot.engine.preset_key,
                    "server": slot.engine.server_status(),
                    "visitor": slot.visitor,
                    **slot.facts,
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
        state, error = self._state_of(slot) if slot is not None else ("absent", None)
        if slot is None or state != READY:
            why = "not in the pool" if slot is None else f"{state}" + (f": {error}" if error else "")
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
