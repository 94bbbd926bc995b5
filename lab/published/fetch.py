"""Fetch the public per-step result files of the catalogue, cache them, import them as runs.

Files come from `<base>/<commit>/<path>` (base: `LAB_PUBLISHED_BASE_URL`, default the public
repository's raw address), at most 4 at a time. Each is streamed into `<cache>/published/files/
<commit>/<path>.part` and renamed when complete; an interrupted download is resumed with an HTTP
Range request. A finished file must parse as JSON and match the sha256 the catalogue or the cache
index knows. The cache index (`<cache>/published/index.json`) keeps per file its size, sha256, model,
score, steps and scoring version. Import writes each run (a whole file, or its shards merged) to
`<results>/published/<run>.json` and imports it with `source = 'published'`.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from lab.published.catalogue import ASSETS, Entry, Run, load_catalogue, runs_of, series_names
from lab.errors import LabError

DEFAULT_BASE_URL = "https://raw.githubusercontent.com/LLM-OS-Models/Terminal"
MAX_IN_FLIGHT = 4
ATTEMPTS = 3
PUBLISHED_FOLDER = "published"  # under the results folder
ProgressFn = Callable[[int, int | None], None]
LIMITS_PATH = ASSETS / "fetch.yaml"
# The checks a cached file passed (see _verify); a file cached under older checks is checked again
# before it is imported (a 0-step or malformed file fetched by an older lab is refused then).
CHECKS_VERSION = 2
LIMITS_ENV = "LAB_PUBLISHED_FETCH_LIMITS"


def fetch_limits() -> dict:
    """The fetch limits (assets/published/fetch.yaml, or the file LAB_PUBLISHED_FETCH_LIMITS names)."""
    import yaml

    path = Path(os.environ.get(LIMITS_ENV) or LIMITS_PATH)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise LabError(f"{LIMITS_ENV}={path}: cannot read the fetch limits ({type(exc).__name__})") from None


def base_url() -> str:
    return os.environ.get("LAB_PUBLISHED_BASE_URL", DEFAULT_BASE_URL).rstrip("/")


def url_of(entry: Entry, base: str | None = None) -> str:
    return f"{(base or base_url()).rstrip('/')}/{entry.commit}/{entry.path}"


# -- cache ---------------------------------------------------------------------------------------
class Cache:
    """Downloaded files and the index of what is known about each (thread-safe)."""

    def __init__(self, cache_dir: str | Path) -> None:
        self.root = Path(cache_dir) / "published"
        self.index_path = self.root / "index.json"
        self._lock = threading.Lock()
        self._index: dict[str, dict] | None = None

    def file(self, entry: Entry) -> Path:
        return self.root / "files" / entry.commit / entry.path

    def index(self) -> dict[str, dict]:
        with self._lock:
            if self._index is None:
                try:
                    self._index = json.loads(self.index_path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    self._index = {}
            return dict(self._index)

    def known(self, entry: Entry) -> dict:
        return self.index().get(f"{entry.commit}:{entry.path}", {})

    def record(self, entry: Entry, facts: dict) -> None:
        self.index()
        with self._lock:
            assert self._index is not None
            key = f"{entry.commit}:{entry.path}"
            if self._index.get(key) == facts:
                return
            self._index[key] = facts
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.index_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._index, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.index_path)

    def expected_sha(self, entry: Entry) -> str | None:
        return entry.sha256 or self.known(entry).get("sha256")


def file_facts(content: bytes, data: dict) -> dict:
    """size, sha256, model, score, steps and scoring version of one downloaded result file."""
    from lab.resultfiles.resultfile import scoring_version

    aggregate = data.get("aggregate") if isinstance(data.get("aggregate"), dict) else {}
    f1 = aggregate.get("avg_command_f1")
    per_step = data.get("per_step") if isinstance(data.get("per_step"), list) else []
    return {
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "model": str(data.get("model_path") or data.get("model") or ""),
        "score": round(100 * float(f1), 2) if isinstance(f1, (int, float)) else None,
        "steps": int(aggregate.get("steps") or len(per_step)),
        "scoring_version": scoring_version(data) if per_step else None,
        "checks": CHECKS_VERSION,
    }


# -- download ------------------------------------------------------------------------------------
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


def _verify(entry: Entry, content: bytes, expected_sha: str | None) -> dict:
    """Parse and check one complete file; LabError (naming the file) when it is not a result file."""
    sha = hashlib.sha256(content).hexdigest()
    if expected_sha and sha != expected_sha:
        raise LabError(f"{entry.path}: sha256 {sha[:12]}… does not match the expected {expected_sha[:12]}…; "
                       "the download was discarded (check LAB_PUBLISHED_BASE_URL, then fetch again)")
    from lab.resultfiles.resultfile import parse_result_bytes

    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {str(exc)[:120]}"
        raise LabError(f"{entry.path}: the server did not send JSON ({why}); "
                       "the download was discarded (check LAB_PUBLISHED_BASE_URL)") from None
    if not isinstance(data, dict) or not isinstance(data.get("per_step"), list):
        raise LabError(f"{entry.path}: not a result file (no per_step list); the download was discarded")
    parse_result_bytes(content, entry.path)  # every field the lab reads: types, finite numbers
    if not data["per_step"]:
        raise LabError(f"{entry.path}: a run with no steps (per_step is empty); the download was discarded")
    low, high = fetch_limits()["score_range"]
    f1 = (data.get("aggregate") or {}).get("avg_command_f1")
    if f1 is not None and not low <= f1 <= high:
        raise LabError(f"{entry.path}: field 'aggregate.avg_command_f1' is {f1!r}, outside {low}..{high}; "
                       "the download was discarded")
    return file_facts(content, data)


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
    """Shuts a file's connection down at its deadline, whatever phase it is in (a server that drips
    its headers a byte at a time never trips a per-read timeout). httpcore's trace hook hands over
    the socket when the connection opens."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._timer: threading.Timer | None = None

    def trace(self, name: str, info: dict) -> None:
        if name == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            sock = info["return_value"].get_extra_info("socket")
            if sock is not None:
                self.cancel()
                self._timer = threading.Timer(max(self.deadline - time.monotonic(), 0.0), self._fire, (sock,))
                self._timer.daemon = True
                self._timer.start()

    def _fire(self, sock) -> None:
        import socket

        self.fired = True
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _download(entry: Entry, cache: Cache, base: str, progress: _Progress, report: FetchReport,
              attempts: int, read_timeout: float) -> None:
    """One file, on its own connection (so that its deadline closes nothing else)."""
    import httpx

    limits = fetch_limits()
    deadline = time.monotonic() + float(limits["file_deadline_s"])
    late = LabError(f"{entry.path}: not complete after {limits['file_deadline_s']} s (the per-file deadline); "
                    "the download was discarded")
    cap = cache.known(entry).get("size") or entry.size or int(limits["max_file_bytes"])
    target = cache.file(entry)
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    last: Exception | None = None
    dog = _Watchdog(deadline)
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
                        if left <= 0:
                            raise late
                        wait = httpx.Timeout(min(read_timeout, left))
                        with client.stream("GET", url, headers=headers, timeout=wait,
                                           extensions={"trace": dog.trace}) as resp:
                            if resp.is_redirect:
                                url = _next_url(entry, url, resp, base, hops, int(limits["max_redirects"]))
                                hops += 1
                                continue
                            _receive(entry, resp, part, have, cap, deadline, limits, progress, report, url)
                            break
                    last = None
                    break
                except (httpx.TransportError, httpx.DecodingError) as exc:
                    last = exc
                    if dog.fired or time.monotonic() >= deadline:
                        raise late from None
        except LabError:
            part.unlink(missing_ok=True)
            raise
        finally:
            dog.cancel()
    if last is not None:
        raise LabError(f"{entry.path}: download interrupted ({type(last).__name__}: {str(last)[:120]}); "
                       "run the fetch again to resume it")
    content = part.read_bytes()
    try:
        facts = _verify(entry, content, cache.expected_sha(entry))
    except LabError:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, target)
    cache.record(entry, facts)
    report.downloaded.append(entry.path)


def _receive(entry: Entry, resp, part: Path, have: int, cap: int, deadline: float, limits: dict,
             progress: _Progress, report: FetchReport, url: str) -> None:
    """Write one response's decoded body into `part`, within the size cap and the file's deadline."""
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
    with open(part, "ab" if resume else "wb") as out:
        for raw in resp.iter_raw():  # as received: a cut leaves every byte read
            chunk = decoder.feed(raw, cap - written)
            written += len(chunk)
            if written > cap:
                raise LabError(f"{entry.path}: larger than {cap} bytes once decoded (the size the catalogue "
                               "knows, or max_file_bytes); the download was discarded")
            out.write(chunk)
            progress.add(len(chunk))
            if time.monotonic() > deadline:
                raise LabError(f"{entry.path}: not complete after {limits['file_deadline_s']} s "
                               "(the per-file deadline); the download was discarded")


def fetch_entries(
    entries: Iterable[Entry],
    cache_dir: str | Path,
    *,
    base: str | None = None,
    progress: bool = True,
    on_progress: ProgressFn | None = None,
    attempts: int = ATTEMPTS,
    timeout: float | None = None,
) -> FetchReport:
    """Download the entries not yet cached (≤ 4 in flight); cached files are re-checked, not re-fetched."""
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
                facts = _verify(entry, content, cache.expected_sha(entry))
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
            for future, entry in futures.items():
                try:
                    future.result()
                except LabError as exc:
                    report.failed.append((entry.path, str(exc)))
    finally:
        bar.close()
    return report


# -- selection -----------------------------------------------------------------------------------
def select_runs(all_runs: bool = False, series: Iterable[str] = (), names: Iterable[str] = (),
                catalogue: list[Entry] | None = None) -> list[Run]:
    """The catalogue runs asked for: every run, the runs of named series, or runs/paths by name.

    A name matches a run key, a repository path, or (when unique) a file name; LabError lists what
    did not match."""
    entries = catalogue if catalogue is not None else load_catalogue()
    runs = runs_of(entries)
    if all_runs:
        return list(runs.values())
    chosen: dict[str, Run] = {}
    known_series = series_names(entries)
    for name in series:
        match = [s for s in known_series if s == name] or [s for s in known_series if name.lower() in s.lower()]
        if not match:
            raise LabError(f"unknown series '{name}'; known: {'; '.join(known_series)}")
        for s in match:
            chosen.update({k: runs[k] for k in known_series[s]})
    for name in names:
        key = name.removesuffix(".json")
        hits = [r for r in runs.values() if key in (r.key, r.key.split("/")[-1])
                or any(name == f.path or name.endswith("/" + f.path.split("/")[-1]) or name == f.path.split("/")[-1]
                       for f in (*r.files, *r.pieces))]
        if not hits:
            raise LabError(f"'{name}' is not in the published catalogue; see `python -m lab data published list`")
        chosen.update({r.key: r for r in hits})
    return list(chosen.values())


# -- import --------------------------------------------------------------------------------------
def run_file(results_dir: str | Path, run: Run) -> Path:
    return Path(results_dir) / PUBLISHED_FOLDER / f"{run.key}.json"


def merged_pieces(pieces: list[dict]) -> dict:
    """Shards/parts of one run as one result dict: steps in piece order, the aggregate recomputed."""
    from lab.resultfiles.resultfile import scorer_for
    from lab.scoring.aggregate import aggregate_scores

    seen, per_step = set(), []
    for piece in pieces:
        for row in piece.get("per_step") or []:
            key = (row.get("task_id"), row.get("step_idx"))
            if key not in seen:
                seen.add(key)
                per_step.append(row)
    merged = {k: v for k, v in pieces[0].items() if k not in ("per_step", "aggregate")}
    merged["per_step"] = per_step
    merged["aggregate"] = aggregate_scores(per_step, scorer_for(merged))
    merged["merged_from"] = len(pieces)
    return merged


def write_run_file(run: Run, cache: Cache, results_dir: str | Path) -> Path:
    """Place a fetched run under `<results>/published/` (unchanged bytes when it is one file);
    an identical file already there is left untouched (so a second fetch changes nothing)."""
    target = run_file(results_dir, run)
    if len(run.files) == 1:
        content = cache.file(run.files[0]).read_bytes()
    else:
        pieces = [json.loads(cache.file(f).read_bytes()) for f in run.files]
        content = json.dumps(merged_pieces(pieces), ensure_ascii=False).encode("utf-8")
    if target.is_file() and target.stat().st_size == len(content) and target.read_bytes() == content:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(content)
    os.replace(tmp, target)
    return target


@dataclass
class PublishedReport:
    fetch: FetchReport
    imported: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.fetch.failed

    def summary(self) -> str:
        f = self.fetch
        lines = [f"{len(f.downloaded)} downloaded ({len(f.resumed)} resumed), {len(f.cached)} from the cache; "
                 f"{len(self.imported)} runs imported, {len(self.unchanged)} unchanged, "
                 f"{len(self.failed) + len(f.failed)} failed"]
        lines += [f"imported {k}" for k in self.imported]
        lines += [f"FAILED {p}: {why}" for p, why in (*f.failed, *self.failed)]
        return "\n".join(lines)


def fetch_and_import(store, runs: list[Run], cache_dir: str | Path, results_dir: str | Path, *,
                     progress: bool = True, on_progress: ProgressFn | None = None,
                     base: str | None = None, attempts: int = ATTEMPTS) -> PublishedReport:
    """Fetch the runs' files, place each run under `<results>/published/`, import it into `store`."""
    from lab.store.importer import import_file
    from lab.store.published_links import link_published

    cache = Cache(cache_dir)
    entries = [f for r in runs for f in r.files]
    report = PublishedReport(fetch_entries(entries, cache_dir, base=base, progress=progress,
                                           on_progress=on_progress, attempts=attempts))
    failed_paths = {p for p, _ in report.fetch.failed}
    for run in runs:
        if any(f.path in failed_paths for f in run.files):
            continue
        try:
            path = write_run_file(run, cache, results_dir)
        except (OSError, ValueError) as exc:
            report.failed.append((run.key, f"{type(exc).__name__}: {exc}"))
            continue
        result = import_file(store, path)
        if result.failed:
            report.failed.extend(result.failed)
        elif result.added:
            report.imported.append(run.key)
        else:
            report.unchanged.append(run.key)
    link_published(store)
    return report


def import_cached(store, runs: list[Run], cache_dir: str | Path, results_dir: str | Path) -> PublishedReport:
    """Import the runs whose files are all in the cache already (no network): for start-up."""
    cache = Cache(cache_dir)
    ready = [r for r in runs if all(cache.file(f).is_file() for f in r.files)]
    return fetch_and_import(store, ready, cache_dir, results_dir, progress=False)


def select_set(spec: str, catalogue: list[Entry] | None = None) -> list[Run]:
    """The runs of an owner's set (`LAB_PUBLISHED`): items separated by ';' or ',', each `all`, a series
    name (or part of one) or a run name."""
    entries = catalogue if catalogue is not None else load_catalogue()
    items = [i.strip() for i in spec.replace(";", ",").split(",") if i.strip()]
    if any(i.lower() == "all" for i in items):
        return select_runs(all_runs=True, catalogue=entries)
    known = series_names(entries)
    chosen: dict[str, Run] = {}
    for item in items:
        is_series = any(item.lower() in s.lower() for s in known)
        runs = select_runs(series=[item], catalogue=entries) if is_series else select_runs(names=[item], catalogue=entries)
        chosen.update({r.key: r for r in runs})
    return list(chosen.values())


def load_owner_set(store, settings, spec: str | None = None, progress: bool = True) -> PublishedReport | None:
    """At start-up: fetch (or take from the cache) and import the set named by `LAB_PUBLISHED`, and
    refresh the published links (also after a store rebuild). None when no set is configured."""
    from lab.store.published_links import link_published
    from lab.store.unique_names import unique_display_names

    spec = spec if spec is not None else os.environ.get("LAB_PUBLISHED", "")
    if store is not None:
        unique_display_names(store)  # a store built before names were made unique
        if (Path(settings.results_dir) / PUBLISHED_FOLDER).is_dir():
            link_published(store)
    if not spec.strip() or store is None:
        return None
    return fetch_and_import(store, select_set(spec), settings.cache_dir, settings.results_dir, progress=progress)
