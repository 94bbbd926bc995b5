"""The sweep's driver joins Ray: the cluster at an address, or a local instance; one clear line when
Ray is missing or the cluster cannot be reached (never a minutes-long wait on a dead address)."""
from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from lab.errors import LabError

RAY_MISSING = "Ray is not installed in the lab's environment: pip install -r requirements-ray.txt"
REACH_TIMEOUT_S = 3.0


def import_ray():
    """The `ray` package, or LabError(RAY_MISSING)."""
    try:
        import ray
    except ImportError:
        raise LabError(RAY_MISSING) from None
    return ray


def sweep_address(address: str | None) -> str:
    """The address to use: the one given, else $LAB_RAY_ADDRESS, else `local`."""
    return (address or os.environ.get("LAB_RAY_ADDRESS") or "local").strip()


def head_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) of `HEAD:PORT` or `ray://HEAD:PORT`; None for `local` and `auto`."""
    if address in ("local", "auto"):
        return None
    client = address.startswith("ray://")
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port or (10001 if client else 6379)
    except ValueError:
        host = port = None
    if not host or (parts.scheme not in ("", "ray")):
        raise LabError(f"Ray address {address[:200]!r}: expected HEAD:PORT, ray://HEAD:PORT, auto or local")
    return host, port


def check_reachable(address: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """LabError naming the address when nothing answers at the head's port."""
    endpoint = head_endpoint(address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except (OSError, UnicodeError) as exc:  # UnicodeError: a host name IDNA cannot encode (a label over 63)
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise LabError(f"cannot reach the Ray cluster at {address[:200]} ({why}): is `ray start --head` running "
                       "there, and is the address right?") from None


def connect(address: str | None):
    """Ray, connected to `address` (see sweep_address; `local` starts an instance here without a
    dashboard), and the context ray.init returned."""
    ray = import_ray()
    address = sweep_address(address)
    check_reachable(address)
    kwargs = {"include_dashboard": False} if address == "local" else {"address": address}
    try:
        context = ray.init(ignore_reinit_error=True, log_to_driver=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, version mismatch …: one line for the user
        ray.shutdown()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LabError(f"cannot connect to the Ray cluster at {address[:200]}: {first[:300]}") from None
    return ray, context


def dashboard_url(context) -> str | None:
    """The cluster dashboard's URL from ray.init's context (None when the dashboard is off)."""
    url = str(getattr(context, "dashboard_url", "") or "").strip()
    if not url:
        return None
    return url if "://" in url else f"http://{url}"
