"""Download published result files into the cache: at most 4 at a time, each on its own connection,
resumed with a Range request, held to the fetch limits (decoded-size cap, per-file deadline, redirects
only within LAB_PUBLISHED_BASE_URL, allowed encodings), and checked before it is kept."""
from __future__ import annotations

import collections
import hashlib
import os
import socket
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

from lab.errors import LabError
from lab.published.cache import CHECKS_VERSION, Cache, verify_file
from lab.published.catalogue import Entry
from lab.published.limits import fetch_limits
from lab.security import safe_files
from lab.settings import env

DEFAULT_BASE_URL = "https://raw.githubusercontent.com/LLM-OS-Models/Terminal"
MAX_IN_FLIGHT = 4
ATTEMPTS = 3
ProgressFn = Callable[[int, int | None], None]
FileFn = Callable[[int, int, str], None]  # (files done, files to download, the path just ended)


def base_url() -> str:
    return (env("LAB_PUBLISHED_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")  # "" (a build arg): unset


def url_of(entry: Entry, base: str | None = None) -> str:
    return f"{(base or base_url()).rstrip('/')}/{entry.commit}/{entry.path}"


@dataclass
class FetchReport:
    """What a fetch did, per repository path."""

    downloaded: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


class _Progress:
    """One byte counter over all downloads: a tqdm bar and/or a callback (done, total)."""

    def __init__(self, total: int | None, show: bool, on_progress: ProgressFn | None) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, unit="B", unit_scale=True, desc="published runs", disable=not show)
        self.total, self.done, self.cb = total, 0, on_progress
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.done += n
            self.bar.update(n)
            if self.cb is not None:
                self.cb(self.done, self.total)

    def close(self) -> None:
        self.bar.close()


class _Decoder:
    """Bytes of a response as sent (`iter_raw`), decoded here so that no chunk can grow past `room`
    bytes (a gzip bomb is cut at the cap, not after it is in memory)."""

    def __init__(self, encoding: str, allowed: list[str], name: str) -> None:
        self.name = name
        encoding = encoding.strip().lower()
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in allowed:
            self._z = zlib.decompressobj(47 if "gzip" in encoding else 15)
        else:
            raise LabError(f"{name}: the server sent content encoding '{encoding[:40]}', which the lab does not read")

    def feed(self, raw: bytes, room: int) -> bytes:
        if self._z is None:
            return raw
        try:
            out = self._z.decompress(raw, room + 1)
        except zlib.error as exc:
            raise LabError(f"{self.name}: the server's gzip/deflate body does not decode ({exc})") from None
        return out


def _next_url(entry: Entry, url: str, resp, base: str, hops: int, limit: int) -> str:
    """Where a redirect points, when it may be followed: the configured base only, `limit` hops at most."""
    from urllib.parse import urljoin, urlsplit

    if hops >= limit:
        raise LabError(f"{entry.path}: more than {limit} redirects (a redirect loop?); nothing was kept")
    target = urljoin(url, resp.headers.get("location", ""))
    want, got = urlsplit(base), urlsplit(target)
    if (got.scheme, got.hostname, got.port) != (want.scheme, want.hostname, want.port):
        raise LabError(f"{entry.path}: the server redirects to {got.scheme}://{got.netloc}, which is not the "
                       "configured LAB_PUBLISHED_BASE_URL; not followed")
    return target


class _Watchdog:
    """Shuts a file's connection down at its deadline, or when it receives fewer than `min_rate` bytes
    per second over any `window` seconds (as curl's --speed-limit/--speed-time), whatever phase it is in:
    a server that drips its headers or body a byte at a time never trips a per-read timeout. httpcore's
    trace hook hands over the socket when a connection opens; `received` counts the body's raw bytes."""

    def __init__(self, deadline: float, min_rate: float, window: float) -> None:
        self.deadline, self.min_rate, self.window = deadline, min_rate, window
        self.why: str | None = None  # "deadline" or "slow" once it fired
        self.received = 0
        self._sock = None
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def fired(self) -> bool:
        return self.why is not None

    def trace(self, name: str, info: dict) -> None:
        if name == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                with self._lock:
                    self._sock = sock
                    self._samples.clear()  # a new connection: its rate is measured from now
                    self._samples.append((time.monotonic(), self.received))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._watch, name="lab-fetch-watchdog", daemon=True)
                    self._thread.start()

    def feed(self, n: int) -> None:
        """`n` more bytes arrived."""
        self.received += n

    def _watch(self) -> None:
        step = max(min(self.window / 10, 0.5), 0.05)
        while not self._done.wait(max(min(step, self.deadline - time.monotonic()), 0.0)):
            now = time.monotonic()
            with self._lock:
                samples = self._samples
                samples.append((now, self.received))
                while len(samples) > 1 and samples[1][0] <= now - self.window:
                    samples.popleft()
                slow = (self.min_rate > 0 and samples[0][0] <= now - self.window
                        and self.received - samples[0][1] < self.min_rate * (now - samples[0][0]))
                why = "deadline" if now >= self.deadline else "slow" if slow else None
                if why is not None:
                    self.why = why
                    self._shutdown()
                    return

    def _shutdown(self) -> None:
        import socket

        try:
            if self._sock is not None:
                self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        self._done.set()


def _cut(entry: Entry, dog: _Watchdog, limits: dict) -> LabError:
    """Why a file was cut: its deadline, or a transfer rate below the minimum."""
    if dog.why == "slow":
        return LabError(f"{entry.path}: slower than {limits['min_rate_bytes_s']} bytes/s for "
                        f"{limits['min_rate_window_s']} s (the minimum transfer rate); the download was discarded")
    return LabError(f"{entry.path}: not complete after {limits['file_deadline_s']} s (the per-file deadline); "
                    "the download was discarded")


def _download(entry: Entry, cache: Cache, base: str, progress: _Progress, report: FetchReport,
              attempts: int, read_timeout: float) -> None:
    """One file, on its own connection (so that its deadline closes nothing else)."""
    import httpx

    limits = fetch_limits()
    deadline = time.monotonic() + float(limits["file_deadline_s"])
    cap = cache.known(entry).get("size") or entry.size or int(limits["max_file_bytes"])
    target = cache.file(entry)
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    last: Exception | None = None
    dog = _Watchdog(deadline, float(limits["min_rate_bytes_s"]), float(limits["min_rate_window_s"]))
    with httpx.Client(timeout=read_timeout, follow_redirects=False) as client:
        try:
            for _ in range(max(attempts, 1)):
                have = part.stat().st_size if part.exists() else 0
                headers = {"Range": f"bytes={have}-"} if have else {}
                headers["Accept-Encoding"] = ", ".join(["identity", *limits["encodings"]])
                url, hops = url_of(entry, base), 0
                try:
                    while True:
                        left = deadline - time.monotonic()
                        if left <= 0 or dog.fired:
                            raise _cut(entry, dog, limits)
                        wait = httpx.Timeout(min(read_timeout, left))
                        with client.stream("GET", url, headers=headers, timeout=wait,
                                           extensions={"trace": dog.trace}) as resp:
                            if resp.is_redirect:
                                url = _next_url(entry, url, resp, base, hops, int(limits["max_redirects"]))
                                hops += 1
                                continue
                            _receive(entry, resp, part, have, cap, dog, limits, progress, report, url)
                            if dog.fired:  # the cut may read as the body's end (no Content-Length)
                                raise _cut(entry, dog, limits)
                            break
                    last = None
                    break
                except (httpx.TransportError, httpx.DecodingError) as exc:
                    last = exc
                    if _unresolved_host(exc, url):  # no retry can help: say so at once (a part file stays)
                        break
                    if dog.fired or time.monotonic() >= deadline:
                        dog.why = dog.why or "deadline"
                        raise _cut(entry, dog, limits) from None
        except LabError:
            part.unlink(missing_ok=True)
            raise
        finally:
            dog.cancel()
    host = _unresolved_host(last, url_of(entry, base)) if last is not None else None
    if host:
        raise LabError(f"{entry.path}: the host {host} cannot be resolved (no DNS answer); check the network "
                       "or LAB_PUBLISHED_BASE_URL, then run the fetch again")
    if last is not None:
        raise LabError(f"{entry.path}: download interrupted ({type(last).__name__}: {str(last)[:120]}); "
                       "run the fetch again to resume it")
    content = safe_files.read_bytes(part)
    try:
        facts = verify_file(entry, content, cache.expected_sha(entry))
    except LabError:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, target)
    cache.record(entry, facts)
    report.downloaded.append(entry.path)


def _unresolved_host(exc: BaseException | None, url: str) -> str | None:
    """The URL's host when `exc` comes from a failed name lookup (socket.gaierror in its chain)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, socket.gaierror):
            return urlsplit(url).hostname or url
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _receive(entry: Entry, resp, part: Path, have: int, cap: int, dog: _Watchdog, limits: dict,
             progress: _Progress, report: FetchReport, url: str) -> None:
    """Write one response's decoded body into `part`, within the size cap, the file's deadline and
    the minimum transfer rate (`dog`)."""
    if resp.status_code == 416 and have:  # the part file is already complete
        return
    if resp.status_code not in (200, 206):
        raise LabError(f"{entry.path}: HTTP {resp.status_code} from {url}")
    encoding = resp.headers.get("content-encoding", "")
    resume = resp.status_code == 206 and have and not encoding.strip()
    if resume and entry.path not in report.resumed:
        report.resumed.append(entry.path)
    if not resume and have:
        progress.add(-have)
        have = 0
    decoder = _Decoder(encoding, [str(e) for e in limits["encodings"]], entry.path)
    written = have
    with safe_files.open_file(part, "ab" if resume else "wb") as out:  # never through a link
        for raw in resp.iter_raw():  # as received: a cut leaves every byte read
            dog.feed(len(raw))
            chunk = decoder.feed(raw, cap - written)
            written += len(chunk)
            if written > cap:
                raise LabError(f"{entry.path}: larger than {cap} bytes once decoded (the size the catalogue "
                               "knows, or max_file_bytes); the download was discarded")
            out.write(chunk)
            progress.add(len(chunk))
            if time.monotonic() > dog.deadline:
                dog.why = dog.why or "deadline"
            if dog.fired:
                raise _cut(entry, dog, limits)


def fetch_entries(
    entries: Iterable[Entry],
    cache_dir: str | Path,
    *,
    base: str | None = None,
    progress: bool = True,
    on_progress: ProgressFn | None = None,
    attempts: int = ATTEMPTS,
    timeout: float | None = None,
    on_file: FileFn | None = None,
) -> FetchReport:
    """Download the entries not yet cached (≤ 4 in flight); cached files are re-checked, not re-fetched.
    `on_file(files done, files to download, path)` hears of each download as it ends (done or failed)."""
    cache, report, base = Cache(cache_dir), FetchReport(), base or base_url()
    todo = []
    for entry in dict.fromkeys(entries):
        path = cache.file(entry)
        if path.is_file():
            content = path.read_bytes()
            known = cache.known(entry)
            if known.get("sha256") and known["sha256"] == hashlib.sha256(content).hexdigest() \
                    and (not entry.sha256 or entry.sha256 == known["sha256"]) \
                    and known.get("checks") == CHECKS_VERSION:
                report.cached.append(entry.path)  # checked when it was fetched; unchanged since
                continue
            try:
                facts = verify_file(entry, content, cache.expected_sha(entry))
            except LabError as exc:
                path.unlink()  # a corrupt cached file is fetched again
                cache.record(entry, {})  # and what the index knew of it (its size) is not trusted
                report.failed.append((entry.path, f"cached copy discarded: {exc}"))
                todo.append(entry)
                continue
            cache.record(entry, facts)
            report.cached.append(entry.path)
        else:
            todo.append(entry)
    report.failed = [f for f in report.failed if f[0] not in {e.path for e in todo}]
    if not todo:
        return report
    sizes = [cache.known(e).get("size") or e.size for e in todo]
    bar = _Progress(None if None in sizes else sum(sizes), progress, on_progress)
    try:
        read_timeout = timeout if timeout is not None else float(fetch_limits()["read_timeout_s"])
        with ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="lab-fetch") as pool:
            futures = {pool.submit(_download, e, cache, base, bar, report, attempts, read_timeout): e for e in todo}
            for n_done, future in enumerate(as_completed(futures), start=1):
                entry = futures[future]
                try:
                    future.result()
                except LabError as exc:
                    report.failed.append((entry.path, str(exc)))
                if on_file is not None:
                    on_file(n_done, len(todo), entry.path)
    finally:
        bar.close()
    return report
