"""LabContext: what every tab shares (settings, replay set, engine pool, store, caches)."""
from __future__ import annotations

import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Generic, Hashable, Iterator, Mapping, Sequence, TypeVar

import cachetools

from lab.data import ReplaySet, load_replay
from lab.errors import LabError
from lab.settings import Settings

if TYPE_CHECKING:  # the types of the fields; the workspace imports none of them until it uses them
    import pandas as pd
    from plotly.graph_objects import Figure

    from lab.engines.common import EngineBase
    from lab.engines.pool import EnginePool
    from lab.engines.preset_changes import PresetChange
    from lab.store.db import Store
    from lab.store.equiv_filler import EquivFiller
    from lab.ui.compare.inflight import Inflight
    from lab.ui.compare.samples_view import SampleSet
    from lab.ui.compare.step_view import AuditView, EngineView
    from lab.visitors import SessionEngines, StatsLimits

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A thread-safe LRU map (per-step engine columns, figures): a `cachetools.LRUCache` behind a lock."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._data: cachetools.LRUCache[K, V] = cachetools.LRUCache(maxsize=capacity)
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._data.get(key)  # a hit makes the key the most recent

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._data

    def drop(self, predicate: Callable[[K], bool]) -> None:
        """Remove every key for which `predicate(key)` is true."""
        with self._lock:
            for key in [k for k in self._data if predicate(k)]:
                del self._data[key]


def no_request() -> str | None:
    """Who is asking outside any request (start-up, background work, the CLI): nobody, i.e. the owner."""
    return None


@dataclass
class EngineEntry:
    """One engine as the UI sees it (from the pool's status)."""

    spec: str
    name: str
    kind: str
    state: str  # loading | ready | failed | crashed
    error: str | None = None
    engine: EngineBase | None = None  # None until it is ready
    device: str = ""
    memory_gb: float | None = None
    notes: str = ""
    server: dict | None = None  # managed servers: state, pid, port, exit code, log tail, GPU memory
    preset: str | None = None  # the preset whose settings the engine runs with (bare or `?preset=KEY`)
    architecture: str | None = None  # the model's class (lab.engines.model_facts), context and dtype it runs with
    context_length: int | None = None
    dtype: str | None = None
    flags: list[str] | None = None  # a managed server's command-line flags (never shown to a public visitor)
    preset_changes: list[PresetChange] | None = None  # what its preset sets vs none
    preset_warning: str | None = None  # its checkpoint is not of the preset's family (lab.engines.preset_fit)

    @property
    def traits(self) -> type[EngineBase]:
        """The class of its kind, whose traits say what the kind does (known before the engine is ready)."""
        from lab.engines.registry import engine_class

        return engine_class(self.kind)

    @property
    def answers_from_data(self) -> bool:
        """Answers from data (a stored run, the reference): Compare fills its column on every step switch."""
        return self.traits.answers_from_data

    @property
    def stored_path(self) -> Path | None:
        """The result file a ready stored run answers from (None while loading, and for the other kinds)."""
        return self.engine.path if self.engine is not None else None


@dataclass
class LabContext:
    """Shared state of one running lab: every field is declared here, typed; nothing else is set on it.
    The store is used through `store_session()` (or `query`), never through its lock."""

    settings: Settings
    replay: ReplaySet | None = None
    replay_error: str | None = None
    pool: EnginePool | None = None  # the engines (lab.serve builds it); None: a context with no engines
    store: Store | None = None  # the results database (None until `open_store`, or when it failed)
    store_error: str | None = None
    # Compare's caches: (engine, step key) -> its column; ("heatmap", engine, step key) -> the heatmap figure
    views: LRUCache[tuple[str, ...], EngineView | Figure] = field(default_factory=LRUCache)
    audits: LRUCache[tuple[str, str], AuditView] = field(default_factory=lambda: LRUCache(512))  # (engine, step key)
    # Compare's Samples panel: (visitor session, engine name, spec, step key) -> the last SampleSet sampled there
    sample_sets: LRUCache[tuple[str | None, str, str, str], SampleSet] = field(default_factory=lambda: LRUCache(512))
    startup_warnings: list[str] = field(default_factory=list)
    broken_results: list[tuple[str, str]] = field(default_factory=list)  # (file, why) not imported at start
    sessions: SessionEngines | None = None  # public mode: visitors' engines per session
    stats_limits: StatsLimits | None = None  # public mode: how much statistics a visitor may start
    equiv_filler: EquivFiller | None = None  # fills imported runs' equiv columns in the background
    inflight: Inflight | None = None  # Compare: answers being generated now, per (engine, step); made on first use
    _keys: list[str] | None = None
    _store_lock: threading.Lock = field(default_factory=threading.Lock)
    _run_ids: dict[tuple[str, int, float], str] = field(default_factory=dict)  # (file, size, mtime) -> run id
    _known_runs: set[str] = field(default_factory=set)  # run ids once found in the store (they stay: content hashes)
    # who is asking (a visitor's session, its client): none outside a request; the UI passes Gradio's readers
    current_session: Callable[[], str | None] = field(default=no_request, repr=False)
    current_client: Callable[[], str | None] = field(default=no_request, repr=False)

    @property
    def replay_error_html(self) -> str:
        return escape(self.replay_error) if self.replay_error else ""

    def step_keys(self) -> list[str]:
        if self._keys is None:
            self._keys = [s.key for s in self.replay.steps] if self.replay else []
        return self._keys

    def set_replay(self, replay: ReplaySet) -> None:
        self.replay, self.replay_error, self._keys = replay, None, None
        self.views = LRUCache(self.views.capacity)
        self.audits = LRUCache(self.audits.capacity)

    def load_replay(self, source: str | None = None) -> None:
        """Load the configured replay (or `source`); a problem is kept in `replay_error`."""
        try:
            self.set_replay(load_replay(source or self.settings.replay_path, settings=self.settings))
        except LabError as exc:
            self.replay, self.replay_error = None, str(exc)
        except Exception as exc:  # noqa: BLE001 - the app starts and shows the problem instead of dying
            self.replay = None
            self.replay_error = f"replay source {source or self.settings.replay_path!r} could not be loaded: {type(exc).__name__}: {exc}"

    def download_replay(self) -> None:
        """Download the public replay file into the cache and load it (raises LabError on failure)."""
        from lab.data import check_replay_file, download_replay
        from lab.data.sources import expected_replay

        path = download_replay(self.settings.replay_url, self.settings.cache_dir, expect=expected_replay(self.settings),
                               check=check_replay_file)
        self.set_replay(load_replay(str(path), settings=self.settings))
        self.replay_known()

    def replay_known(self) -> None:
        """A replay became known after the store was opened: runs whose equiv_f1 was filled without
        it are filled again from it in the background (one value, the one Compare computes)."""
        from lab.store.equiv_columns import replay_equiv_contexts
        from lab.store.equiv_fill import refill_stale

        if self.store is None:
            return
        self.store.equiv_contexts = replay_equiv_contexts(self.settings)
        with self.store_session() as store:
            refilled = refill_stale(store)
        if refilled:
            self.kick_equiv()

    # --- store -------------------------------------------------------------------------
    @contextmanager
    def store_session(self) -> Iterator[Store]:
        """Hold the store for a block of reads or writes (the tabs share one DuckDB connection); yields it
        (LabError saying why when it is not open). Keep computing out of the block: others wait while it is held."""
        with self._store_lock:
            if self.store is None:
                raise LabError(self.store_error or "the results database is not open")
            yield self.store

    def stats_admission(self, turn: bool = True) -> ContextManager[None]:
        """Entered around a statistics computation nobody has made yet: the visitor's limits in public mode
        (lab.visitors.StatsLimits; `turn=False` for one of bounded cost, such as two runs compared), nothing for
        the owner's local lab."""
        if self.stats_limits is None:
            return nullcontext()
        return self.stats_limits.admit(self.current_client(), turn)

    def pair_admission(self) -> ContextManager[None]:
        """stats_admission for two runs compared (Compare's and Triage's run-level block)."""
        return self.stats_admission(turn=False)

    def open_store(self) -> None:
        """Open (building or syncing) the DuckDB store; a problem is kept in `store_error`.

        Imports leave a run's equiv_f1 columns pending; a background filler computes them (the
        tables say "equiv pending" meanwhile), so opening and importing cost what they did
        before equiv_f1."""
        from lab.store.equiv_filler import EquivFiller
        from lab.store.importer import import_path
        from lab.store.opening import open_store

        try:
            self.store, self.store_error = open_store(self.settings, defer_equiv=True), None
        except LabError as exc:
            self.store, self.store_error = None, str(exc)
            return
        self.equiv_filler = EquivFiller.attach(self.store)
        self.broken_results = list(getattr(self.store, "import_problems", []))
        runs = Path(self.settings.runs_dir).resolve()
        results = Path(self.settings.results_dir).resolve()
        if runs.is_dir() and results not in (runs, *runs.parents):  # LAB_RUNS_DIR outside results/
            report = import_path(self.store, runs)
            self.broken_results.extend(report.failed)

    def kick_equiv(self) -> None:
        """Ask the background filler to fill any run whose equiv columns are pending."""
        if self.equiv_filler is not None:
            self.equiv_filler.kick()

    def import_run(self, path: str | Path) -> str:
        """Import one new result file into the store; returns its run id (LabError naming the file)."""
        from lab.store.importer import import_file, run_id_of

        if self.store is None:
            raise LabError(f"saved {path}, but the results database is not open: {self.store_error}")
        with self.store_session() as store, store.hold():
            report = import_file(store, path)
        if report.failed:
            name, why = report.failed[0]
            raise LabError(f"saved {name}, but importing it into the results database failed: {why}")
        run_id = run_id_of(Path(path).read_bytes())
        from lab.triage import refresh_step_flags

        with self.store_session() as store:
            refresh_step_flags(store, [run_id])  # failure kinds and risk flags for triage
        return run_id

    def query(self, sql: str, params: Sequence[object] | Mapping[str, object] | None = None) -> pd.DataFrame:
        """A parameterized store query (serialized: one DuckDB connection is shared by the tabs)."""
        with self.store_session() as store:
            return store.query(sql, params)

    def run_path(self, run_id: str) -> str:
        """The result file of a stored run (LabError when the run has none)."""
        df = self.query("SELECT path FROM runs WHERE run_id = ?", [run_id])
        if df.empty or not df.iloc[0]["path"]:
            raise LabError(f"run '{run_id}' has no result file with per-step answers (a leaderboard row only)")
        path = Path(str(df.iloc[0]["path"]))
        return str(path if path.is_absolute() else Path(self.settings.results_dir) / path)

    def stored_run_id(self, path: str | Path) -> str | None:
        """The store's run id of a result file (lab.store's `run_id_of` its bytes), or None when the
        file is unreadable or that run is not in the store. Cached per (path, size, mtime)."""
        from lab.store.importer import run_id_of

        if self.store is None:
            return None
        try:
            stat = Path(path).stat()
            key = (str(path), stat.st_size, stat.st_mtime)
            if key not in self._run_ids:
                self._run_ids[key] = run_id_of(Path(path).read_bytes())
            run_id = self._run_ids[key]
            if run_id in self._known_runs:  # a run once found stays in the store (ids are content hashes)
                return run_id
            known = self.query("SELECT count(*) AS n FROM runs WHERE run_id = ?", [run_id])
        except (OSError, LabError):
            return None
        if int(known.iloc[0]["n"]):
            self._known_runs.add(run_id)
            return run_id
        return None

    def add_stored_run(self, run_id: str) -> str:
        """Add a stored run as a `stored:PATH` engine column (once); returns the engine's name."""
        spec = f"stored:{self.run_path(run_id)}"
        shown = self.shown_text(spec)
        for entry in self.engine_entries():
            if entry.spec in (spec, shown):
                return entry.name
        return self.add_engine(spec, wait=True)

    # --- engines -----------------------------------------------------------------------
    def engine_entries(self) -> list[EngineEntry]:
        """Every engine of the pool, in the order added."""
        if self.pool is None:
            return []
        entries, by_visitors = [], set()
        for row in self.pool.status():
            try:
                engine = self.pool.get(row["name"]) if row["state"] == "ready" else None
            except LabError:  # removed meanwhile
                continue
            entries.append(entry_from_status(row, engine))
            if row.get("visitor"):
                by_visitors.add(row["name"])
        if self.sessions is None:
            return entries
        session = self.current_session()
        visible = set(self.sessions.visible([e.name for e in entries], session, by_visitors))
        return [self.shown_entry(e) for e in entries if e.name in visible]

    def shown_text(self, text: str | None) -> str | None:
        """`text` as visitors may see it: no absolute server paths in public mode."""
        if not self.settings.public:
            return text
        from lab.security.paths import redact_paths

        return redact_paths(text, self.settings)

    def shown_entry(self, entry: EngineEntry) -> EngineEntry:
        """`entry` as a visitor may see it (changed in place): no server command line or flags, and in public mode
        no absolute server paths."""
        entry.spec, entry.error, entry.notes = (self.shown_text(entry.spec), self.shown_text(entry.error),
                                                self.shown_text(entry.notes))
        entry.flags = None  # the server's command line is the owner's
        if entry.preset_changes:  # so are its flags; the rest is shown without server paths
            entry.preset_changes = [replace(c, with_preset=self.shown_text(c.with_preset), without=self.shown_text(c.without))
                                    for c in entry.preset_changes if c.part != "server flag"]
        entry.preset_warning = self.shown_text(entry.preset_warning)
        if entry.server:  # a managed server's log tail and log file: no server paths, no command line
            from lab.engines.servers.supervisor import without_command

            if entry.error:
                entry.error = "\n".join(without_command(line) for line in entry.error.split("\n"))
            entry.server = {**entry.server, "log": self.shown_text(entry.server.get("log")),
                            "tail": [self.shown_text(without_command(line)) for line in entry.server.get("tail") or []]}
        return entry

    def add_engine(self, spec: str, wait: bool = False) -> str:
        """Add `spec` to the pool (LabError for a bad or disallowed spec); returns the engine's name.
        In public mode the engine belongs to the visitor's session (capped; see lab.visitors)."""
        from lab.visitors import public_limit

        session = self.current_session() if self.sessions is not None else None
        if session:
            for entry in self.engine_entries():  # the owner's and this visitor's engines
                if entry.spec in (spec, self.shown_text(spec)):
                    return entry.name
            client = self.current_client()
            self.sessions.check_room(session, client)
            self.pool.check_allowed(spec, visitor=True)
            with self.sessions.reserve(session, client):  # checked again, counted while it is added
                # its vLLM engines share one visitor-sized part of the memory budget with the client's others
                holder = self.sessions.client_of(session) or f"session {session}"
                name = self.pool.add(spec, visitor=True, client=holder, client_share=public_limit("client_vllm_share"))
                self.sessions.add(session, name)  # an add is use: the session's idle clock restarts
        else:
            name = self.pool.add(spec)
        self.forget_engine(name)
        if wait:
            self.pool.wait([name])
        return name

    def add_engines(self, specs: list[str]) -> list[str]:
        """Add several engines at once (vLLM engines split their GPU's memory budget); a visitor's
        go one by one, each checked and counted like `add_engine`."""
        if self.sessions is not None and self.current_session():
            return [self.add_engine(spec) for spec in specs]
        names = self.pool.add_many(list(specs))
        for name in names:
            self.forget_engine(name)
        return names

    def restart_engine(self, name: str) -> None:
        """Restart a managed engine's server; its cached columns go. In public mode a visitor
        may restart only the engines it added (like unloading)."""
        session = self.current_session() if self.sessions is not None else None
        if session and not self.sessions.owns(session, name):
            if name in self.pool.names() and not self.sessions.is_visitor_engine(name):
                raise LabError(f"'{name}' is one of the owner's engines; visitors cannot restart it")
            raise LabError(f"no engine named '{name}' among your engines")
        self.pool.restart(name)
        self.forget_engine(name)

    def remove_engine(self, name: str) -> None:
        """Unload an engine; in public mode a visitor may unload only the engines it added."""
        session = self.current_session() if self.sessions is not None else None
        if session:
            if not self.sessions.owns(session, name):
                if name in self.pool.names() and not self.sessions.is_visitor_engine(name):
                    raise LabError(f"'{name}' is one of the owner's engines; visitors cannot unload it")
                raise LabError(f"no engine named '{name}' among your engines")
            if not self.sessions.release(session, name):
                return  # the same engine is still used by another visitor
        self.pool.remove(name)
        self.forget_engine(name)

    def visitor_used(self) -> None:
        """The current visitor session used its engines (a generation): its idle clock restarts."""
        if self.sessions is not None:
            self.sessions.used(self.current_session())

    def end_session(self, session: str | None) -> None:
        """A visitor left: unload the engines only that session held."""
        if self.sessions is None or not session:
            return
        for name in self.sessions.end(session):
            try:
                self.pool.remove(name)
            except LabError:
                pass
            self.forget_engine(name)

    def forget_engine(self, name: str) -> None:
        """Drop the cached columns and prompt audits of an engine (after unloading or reloading it)."""
        self.views.drop(lambda key: name in key[:2])
        self.audits.drop(lambda key: key[0] == name)


def entry_from_status(row: dict, engine: EngineBase | None = None) -> EngineEntry:
    """Adapt one `EnginePool.status()` row to an EngineEntry."""
    info = None
    if engine is not None:
        try:
            info = engine.describe()
        except Exception:  # noqa: BLE001 - a status line must never fail
            info = None
    return EngineEntry(
        spec=str(row["spec"]),
        name=str(row["name"]),
        kind=str(row.get("kind") or ""),
        state=str(row.get("state") or "loading"),
        error=row.get("error"),
        engine=engine,
        device=str(row.get("device") or ""),
        memory_gb=row.get("memory_gb"),
        notes=str(getattr(info, "notes", "") or "") if info else "",
        server=row.get("server"),
        preset=row.get("preset"),
        # before the engine describes itself (loading, failed), what its checkpoint's config.json says
        architecture=getattr(info, "architecture", None) or row.get("checkpoint"),
        context_length=getattr(info, "context_length", None),
        dtype=getattr(info, "dtype", None),
        flags=getattr(info, "flags", None),
        preset_changes=row.get("preset_changes"),
        preset_warning=row.get("preset_warning"),
    )
