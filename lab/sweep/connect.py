"""The sweep's driver joins Ray: the cluster at an address, or a local instance. Every way it can fail is
one clear line, never a minutes-long wait: the address Ray really dials (HEAD:PORT with a loopback host
becomes this node's own address) gets a 3-second TCP connect, then one bounded call of Ray's own GCS
protocol tells a Ray head from any other listener and says whether it wants a token (lab.sweep.auth);
ray.init runs only after that. A Stop (`stop`) ends the wait at once."""
from __future__ import annotations

import os
import socket
import tempfile
import threading
from urllib.parse import urlsplit

from lab.errors import LabError
from lab.settings import env

RAY_MISSING = "Ray is not installed in the lab's environment: pip install -r requirements-ray.txt"
REACH_TIMEOUT_S = 3.0
_INIT = threading.Lock()  # one ray.init / shutdown at a time in this process (an abandoned connect included)
_WATCHDOG: list = []  # the reaper of a `local` instance this process started (lab.sweep.reaper)


def import_ray():
    """The `ray` package, or LabError(RAY_MISSING)."""
    try:
        import ray
    except ImportError:
        raise LabError(RAY_MISSING) from None
    return ray


def sweep_address(address: str | None) -> str:
    """The address to use: the one given, else $LAB_RAY_ADDRESS, else `local`."""
    return (address or env("LAB_RAY_ADDRESS") or "local").strip()


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


def dialled(address: str) -> str | None:
    """The HOST:PORT Ray's driver dials for a GCS address (Ray turns a loopback host into this node's own
    address; `auto` reads the cluster this machine last started); None for `local`, `ray://` and an
    `auto` that finds nothing (ray.init then says so at once)."""
    if address == "local" or address.startswith("ray://"):
        return None
    if address != "auto":
        host, port = head_endpoint(address)
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    from ray._private.services import canonicalize_bootstrap_address

    try:
        return canonicalize_bootstrap_address(address)
    except Exception as exc:  # noqa: BLE001 - a host this machine cannot resolve, a malformed RAY_ADDRESS …
        raise LabError(f"Ray address {address[:200]}: {type(exc).__name__}: {str(exc)[:200]}") from None


def check_reachable(address: str, target: str | None = None, timeout: float = REACH_TIMEOUT_S) -> None:
    """LabError naming the address (and the one Ray dials, when it differs) when nothing answers there."""
    endpoint = head_endpoint(target or address)
    if endpoint is None:
        return
    try:
        socket.create_connection(endpoint, timeout=timeout).close()
    except (OSError, UnicodeError) as exc:  # UnicodeError: a host name IDNA cannot encode (a label over 63)
        why = getattr(exc, "strerror", None) or type(exc).__name__
        via = f"; Ray dials {target[:200]}" if target and target != address else ""
        raise LabError(f"cannot reach the Ray cluster at {address[:200]} ({why}{via}): is `ray start --head` running "
                       "there, and is the address right?") from None


def _gcs_answer_s() -> int:
    from lab.sweep.specs import limits

    return limits()["gcs_answer_s"]


def gcs_answers(address: str, target: str) -> bool:
    """One bounded call of Ray's GCS protocol at `target` (as this process's token mode stands): True when
    the head answers, False when it asks for a token (or refuses the one sent); LabError when what
    listens there is no Ray head."""
    from ray._raylet import InnerGcsClient
    from ray.exceptions import AuthenticationError

    seconds = _gcs_answer_s()
    try:
        InnerGcsClient.standalone(target, None, seconds * 1000)
    except AuthenticationError:
        return False
    except Exception as exc:  # noqa: BLE001 - RpcError "Timed out while waiting for GCS": not Ray's protocol
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        via = f" (Ray dials {target[:200]})" if target != address else ""
        raise LabError(f"the Ray cluster at {address[:200]}{via} accepts connections but gives no Ray answer in "
                       f"{seconds} s ({first}): is that the head's GCS port (`ray start --head --port PORT`, "
                       "6379 by default)?") from None
    return True


def authenticate(address: str, target: str) -> None:
    """Make this process able to talk to the head at `target`: token mode turned on when the head asks
    for a token and this machine has one; LabError saying what is missing otherwise."""
    from lab.sweep import auth

    auth.check_token_mode()
    if gcs_answers(address, target):
        return
    sent = auth.mode() == "token"
    if not sent and auth.mode() is None and auth.token_source() is not None:
        auth.use_token()
        sent = True
        if gcs_answers(address, target):
            return
    raise auth.refused(address, sent)


def local_temp_dir() -> dict:
    """ray.init's `_temp_dir` for a local instance: this user's own folder under the system's temporary one
    (`$TMPDIR/ray-UID`), not Ray's default `/tmp/ray`, which the first user of a machine owns and every other
    user's local instance then collides with. Nothing when RAY_TMPDIR names one (Ray's own setting wins)."""
    if os.environ.get("RAY_TMPDIR"):
        return {}
    return {"_temp_dir": os.path.join(tempfile.gettempdir(), f"ray-{os.getuid()}")}


def _join(ray, address: str):
    """Ray connected (or a local instance started): the context ray.init returned."""
    target = dialled(address)
    if target is not None:
        check_reachable(address, target)
        authenticate(address, target)
    elif address.startswith("ray://"):
        check_reachable(address)
    kwargs = {"include_dashboard": False, **local_temp_dir()} if address == "local" else {"address": address}
    try:
        context = ray.init(ignore_reinit_error=True, log_to_driver=False, **kwargs)
    except Exception as exc:  # noqa: BLE001 - ConnectionError, version mismatch …: one line for the user
        ray.shutdown()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LabError(f"cannot connect to the Ray cluster at {address[:200]}: {first[:300]}") from None
    if address == "local":
        from lab.sweep.reaper import watch

        _WATCHDOG.append(watch(context.address_info["session_dir"]))
    return context


def connect(address: str | None, stop: threading.Event | None = None):
    """Ray, connected to `address` (see sweep_address; `local` starts an instance here without a
    dashboard, ended with this process however it ends), and the context ray.init returned. A `stop`
    set while connecting ends the wait at once with a LabError; the abandoned connect is undone when it
    finishes."""
    ray = import_ray()
    address = sweep_address(address)
    if stop is None:  # the CLI: in its own thread (Ray sets its SIGTERM handler there), Ctrl-C ends the wait
        with _INIT:
            return ray, _join(ray, address)
    box: dict = {}
    done, handoff = threading.Event(), threading.Lock()

    def attempt() -> None:
        with _INIT:
            try:
                box["context"] = _join(ray, address)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller below
                box["error"] = exc
            with handoff:
                if box.get("abandoned") and "context" in box:
                    _shutdown(ray)
                box["finished"] = True
        done.set()

    threading.Thread(target=attempt, name="lab-sweep-connect", daemon=True).start()
    while not done.wait(0.1):
        if stop is not None and stop.is_set():
            with handoff:
                box["abandoned"] = not box.get("finished")
            if box["abandoned"]:
                raise LabError(f"stopped while connecting to the Ray cluster at {address[:200]}")
            done.wait()
    if "error" in box:
        raise box["error"]
    return ray, box["context"]


def _shutdown(ray) -> None:
    ray.shutdown()
    while _WATCHDOG:
        reaper = _WATCHDOG.pop()
        reaper.stdin.close()  # the reaper ends whatever of the local instance is left, then exits
        threading.Thread(target=reaper.wait, name="lab-sweep-reaper", daemon=True).start()


def disconnect(ray) -> None:
    """Leave the cluster (a local instance ends with every process it started)."""
    with _INIT:
        _shutdown(ray)


def dashboard_url(context) -> str | None:
    """The cluster dashboard's URL from ray.init's context (None when the dashboard is off)."""
    url = str(getattr(context, "dashboard_url", "") or "").strip()
    if not url:
        return None
    return url if "://" in url else f"http://{url}"
