"""Start a lab without its UI: the workspace (settings, replay, engines, store) with the owner's published
runs and the public policy applied, the console's start-up lines, and the checks before serving."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from lab.booleans import parse_bool
from lab.data import cached_replay_path
from lab.errors import LabError
from lab.security.visitor_writes import opened_kinds, refusal
from lab.settings import env, Settings
from lab.visitors import SessionEngines
from lab.workspace import LabContext

log = logging.getLogger(__name__)

PUBLIC_ENV = "LAB_PUBLIC"


def reaches_beyond_this_machine(host: str) -> bool:
    """Whether binding `host` serves other machines: any address it stands for that is not loopback
    (`0.0.0.0`, `::`, a LAN address or a name for one). A name that does not resolve is left to
    launch() (which says so in one line)."""
    import ipaddress
    import socket

    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return False
    try:
        addresses = {ipaddress.ip_address(name)}
    except ValueError:
        try:
            addresses = {ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in socket.getaddrinfo(name, None)}
        except (OSError, UnicodeError, ValueError):
            return False
    return any(not (getattr(a, "ipv4_mapped", None) or a).is_loopback for a in addresses)


def exposure_problem(host: str, settings: Settings) -> str | None:
    """Why the lab will not serve on `host`, or None. The owner's lab (not public mode) runs Batch and
    sweeps and reads any path: served beyond this machine (`--host 0.0.0.0`, a container's default),
    anyone who reaches the port could. So that takes a choice: LAB_PUBLIC=1 (what a visitor may do:
    docs/security.md), or LAB_PUBLIC=0 to serve the owner's lab there anyway (a trusted network)."""
    if settings.public or parse_bool(env(PUBLIC_ENV, "")) is False:
        return None
    if not reaches_beyond_this_machine(host):
        return None
    return (f"--host {host} (or $GRADIO_SERVER_NAME) serves this lab beyond this machine, and it is the owner's lab "
            "(Batch, sweeps, any path): set LAB_PUBLIC=1 to serve it in public mode, LAB_PUBLIC=0 to serve the owner's "
            "lab there anyway, or --host 127.0.0.1")


def configured_replay(settings: Settings) -> str | None:
    """The replay source to load: --replay / LAB_REPLAY, else the cached download if present."""
    if settings.replay_path:
        return settings.replay_path
    cached = cached_replay_path(settings.replay_url, settings.cache_dir)
    return str(cached) if cached.exists() else None


def create_context(settings: Settings, engine_specs: Sequence[str] = (), open_db: bool = True) -> LabContext:
    """Load what the lab needs; problems become messages in the UI, not exceptions."""
    from lab.engines.admission import Admission
    from lab.engines.pool import EnginePool

    roots = [settings.results_dir, settings.runs_dir]
    admission = Admission(public=settings.public, allow_models=bool(settings.allow_engine_loading),
                          data_roots=[Path(r).expanduser().resolve() for r in roots])
    ctx = LabContext(settings=settings, pool=EnginePool(allow_loading=bool(settings.allow_engine_loading),
                                                        data_roots=roots, admission=admission))
    source = configured_replay(settings)
    if source:
        ctx.load_replay(source)
    try:
        ctx.add_engines(list(engine_specs))  # together: vLLM engines split their GPU's budget
    except LabError:
        for spec in engine_specs:
            try:
                ctx.add_engine(spec)
            except LabError as exc:
                log.warning("engine %s: %s", spec, exc)
                ctx.startup_warnings.append(f"engine '{spec}': {exc}")
    if open_db:
        ctx.open_store()
        load_published(ctx)
    apply_public_policy(ctx)
    return ctx


def load_published(ctx: LabContext) -> None:
    """The owner's set of published runs (LAB_PUBLISHED) and their links; problems become warnings."""
    from lab.published.fetch import load_owner_set

    try:
        report = load_owner_set(ctx.store, ctx.settings)
    except LabError as exc:
        ctx.startup_warnings.append(f"published runs (LAB_PUBLISHED): {exc}")
        return
    if report is not None:
        ctx.startup_warnings.extend(f"published run {p}: {why}" for p, why in (*report.fetch.failed, *report.failed))


def apply_public_policy(ctx: LabContext) -> None:
    """In public mode: engines per visitor session, a store visitors may write only the kinds of things the
    owner opened to them (lab.security.visitor_writes: tags and notes, saved slices, series placements, shared
    what-ifs, each with its own switch), and start-up messages without server paths."""
    if not ctx.settings.public:
        return
    ctx.sessions = SessionEngines()
    if ctx.store is not None:
        ctx.store.refuse_writes = refusal(None)
        ctx.store.visitor_kinds = opened_kinds(ctx.settings)
    ctx.store_error = ctx.shown_text(ctx.store_error)
    ctx.replay_error = ctx.shown_text(ctx.replay_error)
    ctx.startup_warnings[:] = [ctx.shown_text(w) for w in ctx.startup_warnings]


def opening_message(settings: Settings) -> str:
    """What the console says before the (possibly slow, first-start) database build."""
    if settings.db_path.exists():
        return f"opening the results database {settings.db_path} …"
    return (f"building the results database {settings.db_path} from {settings.results_dir} "
            "(first start; later starts are quick) …")


def startup_report(ctx: LabContext) -> list[str]:
    """Console lines after start-up: what was loaded, and every problem as a warning."""
    lines = []
    if ctx.store is None:
        lines.append(f"warning: results database not open: {ctx.store_error}")
    else:
        runs, steps = ctx.store.rows("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM steps)")[0]
        lines.append(f"results: {runs} runs with {steps} per-step rows, plus the published leaderboard")
        if ctx.broken_results:
            lines.append(f"warning: {len(ctx.broken_results)} result file(s) could not be imported (listed on the Results tab):")
            lines.extend(f"warning:   {why if why.startswith(name) else f'{name}: {why}'}" for name, why in ctx.broken_results)
    if ctx.replay_error:
        lines.append(f"warning: {ctx.replay_error}")
    lines.extend(f"warning: {w}" for w in ctx.startup_warnings)
    return lines


def launch_problem(host: str, port: int, exc: OSError) -> str:
    """Why launch() could not serve on host:port, in one line. Gradio says "Cannot find empty port" for
    every failed bind (a taken port, a host name that does not resolve, an address not this machine's):
    binding here once gives the system's own reason."""
    import socket

    if "empty port" not in str(exc):
        return str(exc.strerror or exc)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.bind(address)
    except OSError as why:
        return f"{why.strerror or why}"
    return "the port is in use"
