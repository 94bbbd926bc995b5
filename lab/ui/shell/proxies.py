"""Whom a public deployment believes about a visitor's address (the per-client engine share).

Only `X-Forwarded-For` is read, and only when the TCP peer is a trusted proxy: uvicorn (which
serves Gradio) then takes the rightmost address in that header that is not itself a trusted
proxy, i.e. the one the last trusted proxy saw; anything a client wrote to the left of it is
ignored. `Forwarded:`, `X-Real-IP` and every other header are never read. Trusted proxies:
LAB_TRUSTED_PROXIES, else the defaults of proxies.yaml (none with LAB_PUBLIC=1; the Hugging
Face platform's private network on a Space).
"""
from __future__ import annotations

import ipaddress
import os
from functools import lru_cache
from pathlib import Path

import yaml

from lab.settings import env, on_space, Settings

PROXIES_FILE = Path(__file__).with_name("proxies.yaml")
TRUSTED_ENV = "LAB_TRUSTED_PROXIES"
UVICORN_ENV = "FORWARDED_ALLOW_IPS"  # what uvicorn's ProxyHeadersMiddleware trusts


@lru_cache(maxsize=1)
def _defaults() -> dict:
    return yaml.safe_load(PROXIES_FILE.read_text(encoding="utf-8"))


def _normalised(entry: str) -> str | None:
    """An address or a network as uvicorn reads it (`10.0.0.1/8` -> `10.0.0.0/8`), or None for
    anything else; `*` (trust any peer, and then the leftmost, forgeable value) is never accepted."""
    try:
        return str(ipaddress.ip_network(entry, strict=False)) if "/" in entry else str(ipaddress.ip_address(entry))
    except ValueError:
        return None


def trusted_proxies() -> list[str]:
    """The addresses and networks whose X-Forwarded-For is believed (entries that are neither are dropped)."""
    raw = env(TRUSTED_ENV)
    if raw is not None and raw.strip():
        entries = [] if raw.strip().lower() == "none" else raw.split(",")
    else:
        entries = _defaults()["space" if on_space() else "default"]
    return [n for n in (_normalised(str(e).strip()) for e in entries) if n]


def apply_proxy_trust(settings: Settings) -> None:
    """Before launch on a public deployment: uvicorn believes X-Forwarded-For from the trusted
    proxies only (its own default trusts 127.0.0.1, so any local process could claim any address)."""
    if settings.public:
        os.environ[UVICORN_ENV] = ",".join(trusted_proxies())


UNREADABLE = "behind a trusted proxy, address unreadable"


def client_key(host: str | None) -> str | None:
    """The per-client share's key for an address: an IPv4 address as is (also when written as
    IPv4-mapped IPv6), an IPv6 address as its /64 (proxies.yaml). Anything else can only be an
    X-Forwarded-For entry a trusted proxy passed on (a TCP peer is always an address): all of them
    are one client, the proxy's, so writing a new one does not make a new client."""
    if not host:
        return None
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return UNREADABLE
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/{int(_defaults()['ipv6_client_prefix'])}", strict=False))
    return str(ip)
