"""Which engine specs a pool admits: everything locally; on a public deployment, data-only
engines confined to the data folders, and (with LAB_ALLOW_ENGINES=1) model engines, but
never an `openai:` endpoint on a loopback, link-local or private address unless the owner
lists its host in LAB_ENGINE_HOSTS.

Messages never reveal anything about paths outside the data folders (not even whether they
exist): confinement is decided from the resolved path alone, before the file is touched.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from lab.engines.common import EngineConfig
from lab.errors import EngineSpecError

DATA_KINDS = ("reference", "stored")
ENGINE_HOSTS_ENV = "LAB_ENGINE_HOSTS"


def allowed_hosts_from_env() -> frozenset[str]:
    """Hosts (names or addresses, comma-separated, case-insensitive) the owner allows in LAB_ENGINE_HOSTS."""
    raw = os.environ.get(ENGINE_HOSTS_ENV, "")
    return frozenset(h.strip().lower() for h in raw.split(",") if h.strip())


def inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def confined_path(target: str, roots: list[Path]) -> Path:
    """The resolved `target` when it lies inside one of `roots`; EngineSpecError otherwise, with
    the same message whether or not the outside path exists (only the resolved name is compared)."""
    refused = EngineSpecError(
        f"stored file '{Path(target).name}' is outside the data folders "
        f"({', '.join(r.name + '/' for r in roots) or 'none configured'}); stored: engines read result files from there only"
    )
    try:
        resolved = Path(target).expanduser().resolve()
    except (OSError, ValueError, RuntimeError):
        raise refused from None
    if not target.strip() or not inside(resolved, roots):
        raise refused
    return resolved


def _is_internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_loopback or ip.is_link_local or ip.is_private or ip.is_reserved or ip.is_multicast
            or ip.is_unspecified or not ip.is_global)


def check_endpoint(base_url: str, allowed_hosts: frozenset[str]) -> None:
    """Refuse an endpoint whose host resolves to any loopback, link-local or private address
    (every resolved address is checked) unless the host is in `allowed_hosts`."""
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise EngineSpecError(f"openai engine: '{base_url}' is not an http(s) URL with a host")
    if host in allowed_hosts:
        return
    try:
        infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        raise EngineSpecError(f"openai engine: cannot resolve host '{host}'") from None
    addresses = sorted({info[4][0] for info in infos})
    if not addresses or any(_is_internal(a) for a in addresses):
        raise EngineSpecError(
            f"openai engine: host '{host}' is a loopback, link-local or private address; a public deployment "
            f"sends no requests there unless the owner lists the host in {ENGINE_HOSTS_ENV}"
        )


@dataclass
class Admission:
    """The admission policy of one pool.

    - `public=False` (the owner's local lab): everything is admitted, as before (unless the
      owner switched model engines off with LAB_ALLOW_ENGINES=0: then as on a public Space).
    - `public=True`: `stored:` must resolve inside `data_roots`; model kinds need
      `allow_models` (LAB_ALLOW_ENGINES=1); `openai:` hosts must be public or listed."""

    public: bool = False
    allow_models: bool = True
    data_roots: list[Path] = field(default_factory=list)
    allowed_hosts: frozenset[str] = field(default_factory=allowed_hosts_from_env)

    def check(self, config: EngineConfig) -> None:
        """Raise EngineSpecError when `config` may not be loaded here."""
        if not self.public and self.allow_models:
            return
        if config.kind not in DATA_KINDS and not self.allow_models:
            raise EngineSpecError(
                f"loading '{config.kind}' engines is disabled on this server; only reference and "
                "stored:RESULT_FILE are allowed (the owner can enable engines with LAB_ALLOW_ENGINES=1)"
            )
        if config.kind == "stored":
            confined_path(config.target, self.data_roots)
        elif config.kind == "openai":
            check_endpoint(config.target.partition("#")[0], self.allowed_hosts)
