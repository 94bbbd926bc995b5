"""Ray's token authentication as the sweep's driver meets it. `ray start --head` turns it on when the head
has a token (one `ray.init()` on that machine leaves one in ~/.ray/auth_token), and Ray's driver sends a
token to an explicit address only with RAY_AUTH_MODE=token. The driver turns token mode on itself when
the cluster asks for a token and this machine has one (Ray's order: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
~/.ray/auth_token), and otherwise says in one line what is missing."""
from __future__ import annotations

import os

from lab.errors import LabError

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
DEFAULT_FILE = "~/.ray/auth_token"
HOW = ("copy the head's token (`ray get-auth-token` prints it there) to ~/.ray/auth_token on this machine, "
       "or set RAY_AUTH_TOKEN=TOKEN or RAY_AUTH_TOKEN_PATH=FILE")


def mode() -> str | None:
    """RAY_AUTH_MODE as set here (lower case), or None when unset."""
    value = os.environ.get(MODE_ENV)
    return value.strip().lower() if value is not None else None


def token_source() -> str | None:
    """Where Ray reads this machine's token from, or None when it has none; LabError for a
    RAY_AUTH_TOKEN_PATH that Ray cannot read (Ray would abort the process on it)."""
    from ray._raylet import AuthenticationTokenLoader

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # the app is long-lived: a token written since the last sweep counts
    try:
        found = loader.has_token(ignore_auth_mode=True)
    except Exception as exc:  # noqa: BLE001 - ray.exceptions.AuthenticationError: an unreadable or empty file
        reason = str(getattr(exc, "message", "") or exc).splitlines()[0][:300]
        raise LabError(f"{reason}: {HOW}") from None
    if not found:
        return None
    if os.environ.get(TOKEN_ENV, "").strip():
        return TOKEN_ENV
    if os.environ.get(PATH_ENV):
        return f"{PATH_ENV}={os.environ[PATH_ENV][:200]}"
    return DEFAULT_FILE


def check_token_mode() -> None:
    """LabError when RAY_AUTH_MODE=token is set but no token exists (Ray's client would abort the process)."""
    if mode() == "token" and token_source() is None:
        raise LabError(f"{MODE_ENV}=token is set here but this machine has no Ray token: {HOW}")


def use_token() -> None:
    """Token mode on for this process and the ones it starts: Ray's own switch (what `ray.init()` does
    for a local cluster and `ray start --head` when a token exists)."""
    from ray._private.authentication.authentication_token_setup import _enable_token_auth

    _enable_token_auth()


def refused(address: str, token_sent: bool) -> LabError:
    """The one line for a cluster that refused this driver: what is missing and how to give it."""
    where = f"the Ray cluster at {address[:200]}"
    current = mode()
    if current not in (None, "token"):
        return LabError(f"{where} requires a token (Ray's token authentication) but {MODE_ENV}={current[:40]} here: "
                        f"unset it (or set {MODE_ENV}=token) and {HOW}")
    if token_sent:
        return LabError(f"{where} refused this machine's token (from {token_source()}): it is not the head's; {HOW}")
    return LabError(f"{where} requires a token (Ray's token authentication) and this machine has none: {HOW}")
