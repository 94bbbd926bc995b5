"""Download the replay file, checked before it is kept: a size cap (and the exact size when known), its
sha256 when known, plain bytes only (no content encoding, so no gzip bomb), a deadline for the whole file,
and a format check the caller gives (every line a replay record). A refused file leaves nothing behind."""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lab.errors import LabError

LIMITS = Path(__file__).with_name("download.yaml")
PINS = Path(__file__).with_name("replay_pins.yaml")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ProgressCallback = Callable[[int, int | None], None]
FileCheck = Callable[[Path, str], None]  # (downloaded file, its URL) -> raises LabError when it is no replay


@dataclass(frozen=True)
class Expected:
    """What the owner knows of the file: its sha256 (64 hex digits) and size in bytes, each optional."""

    sha256: str | None = None
    size: int | None = None

    @classmethod
    def parse(cls, sha256: str | None, size: str | int | None) -> "Expected":
        """From strings as given on a command line or in the environment ("" is unknown); LabError if malformed."""
        sha = (sha256 or "").strip().lower() or None
        if sha is not None and not SHA256.match(sha):
            raise LabError(f"replay sha256 {sha256[:80]!r} is not 64 hex digits; give the file's sha256 or leave it empty")
        text = str(size).strip() if size is not None else ""
        if text and not (text.isascii() and text.isdigit() and len(text) <= 15 and int(text) > 0):
            raise LabError(f"replay size {text[:40]!r} is not a positive number of bytes; give the file's size or leave it empty")
        return cls(sha, int(text) if text else None)

    def problem(self, path: Path) -> str | None:
        """Why the file at `path` is not the expected one (None when it is, or nothing is expected)."""
        size = path.stat().st_size
        if self.size is not None and size != self.size:
            return f"{size} bytes, expected {self.size}"
        if self.sha256 is not None:
            digest = file_sha256(path)
            if digest != self.sha256:
                return f"sha256 {digest}, expected {self.sha256}"
        return None


def pinned(url: str) -> Expected:
    """The sha256 and size replay_pins.yaml (or LAB_REPLAY_PINS) lists for `url`; Expected() when none."""
    from lab.settings import read_limits

    data = read_limits(PINS, "LAB_REPLAY_PINS", "the replay files' pins")
    pin = (data.get("pins") or {}).get(url)
    if pin is None:
        return Expected()
    if not isinstance(pin, dict):
        raise LabError(f"the replay files' pins: the entry of {url} is not {{sha256: …, size: …}}")
    sha = pin.get("sha256")
    return Expected.parse(None if sha is None else str(sha), pin.get("size"))  # YAML reads 64 digits as a number


def pinned_shape(url: str) -> dict[str, int]:
    """The steps and tasks replay_pins.yaml (or LAB_REPLAY_PINS) records for `url` ({} when none): a file of
    another shape is not the pinned file, whatever its bytes (the shape is known where the digest is not)."""
    from lab.settings import read_limits

    pin = (read_limits(PINS, "LAB_REPLAY_PINS", "the replay files' pins").get("pins") or {}).get(url)
    if not isinstance(pin, dict):
        return {}
    shape = {}
    for key in ("steps", "tasks"):
        value = pin.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise LabError(f"the replay files' pins: {key} of {url} is not a positive whole number")
        shape[key] = value
    return shape


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hex)."""
    hasher = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()


def download_limits() -> dict:
    """max_bytes, read_timeout_s, deadline_s, max_redirects (download.yaml or LAB_REPLAY_DOWNLOAD_LIMITS)."""
    from lab.settings import read_limits

    data = read_limits(LIMITS, "LAB_REPLAY_DOWNLOAD_LIMITS", "the replay download's limits")
    try:
        return {k: type(default)(data[k]) for k, default in
                (("max_bytes", 0), ("read_timeout_s", 0.0), ("deadline_s", 0.0), ("max_redirects", 0))}
    except (KeyError, TypeError, ValueError) as exc:
        raise LabError(f"the replay download's limits: {exc} is missing or not a number") from None


def fetch_checked(
    url: str,
    target: Path,
    expect: Expected = Expected(),
    check: FileCheck | None = None,
    progress: bool = True,
    on_progress: ProgressCallback | None = None,
) -> Path:
    """Stream `url` into a temporary file beside `target`, check it (limits, `expect`, `check`) and rename it
    onto `target` atomically; LabError naming the URL when anything is wrong (nothing is kept then)."""
    import httpx
    from tqdm.auto import tqdm

    limits = download_limits()
    cap = min(limits["max_bytes"], expect.size or limits["max_bytes"])
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    deadline = time.monotonic() + limits["deadline_s"]
    timeout = httpx.Timeout(limits["read_timeout_s"])
    try:
        with os.fdopen(fd, "wb") as out, httpx.Client(follow_redirects=True, max_redirects=limits["max_redirects"],
                                                      timeout=timeout) as client, \
                client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as resp:
            if resp.status_code != 200:
                raise LabError(f"downloading the replay file from {url} failed: HTTP {resp.status_code}")
            encoding = resp.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise LabError(f"downloading the replay file from {url}: the server sent it encoded "
                               f"({encoding[:40]}), which the lab does not read")
            total = _declared_length(resp.headers.get("content-length"))
            if total is not None and total > cap:
                raise LabError(f"downloading the replay file from {url}: the server announces {total} bytes, "
                               f"more than {_cap_name(cap, expect)}")
            done = 0
            with tqdm(total=total, unit="B", unit_scale=True, desc=target.name, disable=not progress) as bar:
                for chunk in resp.iter_raw():
                    done += len(chunk)
                    if done > cap:
                        raise LabError(f"downloading the replay file from {url}: more than {_cap_name(cap, expect)}; "
                                       "stopped there")
                    if time.monotonic() > deadline:
                        raise LabError(f"downloading the replay file from {url}: not complete after "
                                       f"{limits['deadline_s']:.0f} s; stopped")
                    out.write(chunk)
                    bar.update(len(chunk))
                    if on_progress is not None:
                        on_progress(done, total)
        why = expect.problem(tmp)
        if why:
            raise LabError(f"the replay file from {url} is not the expected one: {why}; nothing was kept")
        if check is not None:
            check(tmp, url)
        os.replace(tmp, target)
    except httpx.HTTPError as exc:
        raise LabError(f"downloading the replay file from {url} failed: {type(exc).__name__}: "
                       f"{str(exc)[:200]}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def _declared_length(value: str | None) -> int | None:
    text = (value or "").strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def _cap_name(cap: int, expect: Expected) -> str:
    return f"the expected {cap} bytes" if expect.size == cap else f"the {cap}-byte limit (max_bytes)"
