"""Which peers' X-Forwarded-For a public deployment believes (lab.ui.shell.proxies), and what uvicorn,
given that list, makes of forged headers (its ProxyHeadersMiddleware, as `python app.py` runs it)."""
from __future__ import annotations

import asyncio
import os

import pytest

from lab.settings import Settings
from lab.ui.shell.proxies import UVICORN_ENV, apply_proxy_trust, trusted_proxies


@pytest.mark.parametrize("space, given, expected", [
    (None, None, []),  # LAB_PUBLIC=1 alone: nobody's header is believed
    ("owner/space", None, ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"]),  # the platform's proxy
    (None, "10.0.0.7, 192.168.1.0/24", ["10.0.0.7", "192.168.1.0/24"]),
    ("owner/space", "none", []),
    (None, "*", []),  # trusting any peer would believe the leftmost, forgeable value: never
    (None, "garbage, 2001:DB8::1, ,10.0.0.300, 10.1.2.3/8", ["2001:db8::1", "10.0.0.0/8"]),
])
def test_trusted_proxies(monkeypatch, space, given, expected):
    for name, value in (("SPACE_ID", space), ("LAB_TRUSTED_PROXIES", given)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert trusted_proxies() == expected


def client_seen(trusted: str, peer: str, headers: list[tuple[bytes, bytes]]) -> str:
    """The client address an app behind uvicorn's proxy-header middleware sees."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    seen = {}

    async def app(scope, receive, send):
        seen["client"] = scope["client"][0]

    scope = {"type": "http", "client": (peer, 5555), "headers": headers, "scheme": "http"}
    asyncio.run(ProxyHeadersMiddleware(app, trusted_hosts=trusted)(scope, None, None))
    return seen["client"]


FORGED = [
    [(b"x-forwarded-for", b"198.51.100.1")],
    [(b"x-forwarded-for", b"198.51.100.1, 203.0.113.9")],
    [(b"x-forwarded-for", b"198.51.100.1"), (b"x-forwarded-for", b"203.0.113.9")],  # the header twice
    [(b"x-forwarded-for", b"2001:db8::1")],
    [(b"x-forwarded-for", b"[2001:db8::1]:443")],
    [(b"x-forwarded-for", b"not an address")],
    [(b"x-forwarded-for", b"")],
    [(b"forwarded", b"for=198.51.100.1")],
    [(b"x-real-ip", b"198.51.100.1")],
]


@pytest.mark.parametrize("headers", FORGED)
def test_public_mode_believes_no_forwarded_header_by_default(monkeypatch, headers):
    """What app.py sets up on a public deployment: uvicorn's own default trusts 127.0.0.1 (so any
    local process could claim any address); with LAB_PUBLIC=1 and no LAB_TRUSTED_PROXIES nobody."""
    monkeypatch.setenv("LAB_PUBLIC", "1")
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("LAB_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv(UVICORN_ENV, "127.0.0.1,::1")
    apply_proxy_trust(Settings())
    for peer in ("127.0.0.1", "::1", "10.0.0.5"):
        assert client_seen(os.environ[UVICORN_ENV], peer, headers) == peer


def test_behind_a_trusted_proxy_the_rightmost_untrusted_address_counts(monkeypatch):
    monkeypatch.setenv("SPACE_ID", "owner/space")
    monkeypatch.delenv("LAB_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("LAB_PUBLIC", "1")
    monkeypatch.setenv(UVICORN_ENV, "127.0.0.1,::1")  # restored afterwards
    apply_proxy_trust(Settings())
    trusted = os.environ[UVICORN_ENV]
    # the platform's proxy (10.16.3.80) appends the address it saw; what the client wrote before it is ignored
    assert client_seen(trusted, "10.16.3.80", [(b"x-forwarded-for", b"1.2.3.4, 198.51.100.7")]) == "198.51.100.7"
    assert client_seen(trusted, "10.16.3.80", [(b"x-forwarded-for", b"10.1.1.1, 198.51.100.7, 10.16.3.81")]) == "198.51.100.7"
    assert client_seen(trusted, "10.16.3.80", [(b"x-real-ip", b"1.2.3.4")]) == "10.16.3.80"
    assert client_seen(trusted, "198.51.100.9", [(b"x-forwarded-for", b"1.2.3.4")]) == "198.51.100.9"  # not a proxy


@pytest.mark.parametrize("host, key", [
    ("198.51.100.7", "198.51.100.7"),
    ("::ffff:198.51.100.7", "198.51.100.7"),  # the same machine written as IPv4-mapped IPv6
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),  # one /64: one client, whichever address it picks
    ("fe80::1%eth0", "fe80::/64"),
    ("testclient", "behind a trusted proxy, address unreadable"),  # no address: only a trusted proxy passes one on
    (None, None),
])
def test_client_key(host, key):
    from lab.ui.shell.proxies import client_key

    assert client_key(host) == key
