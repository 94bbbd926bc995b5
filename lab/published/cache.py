"""The cache of downloaded published files: where each lives, the index of what is known of it (size,
sha256, model, score, steps, scoring version), and the checks a file must pass before it is kept.

Files live at `<cache>/published/files/<commit>/<path>` (streamed into `<path>.part` and renamed when
complete); the index is `<cache>/published/index.json`."""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from lab.errors import LabError
from lab.published.catalogue import Entry
from lab.published.checks import check_step_sizes, check_values
from lab.published.limits import fetch_limits
from lab.security.safe_files import write_atomic

# The checks a cached file passed (see verify_file); a file cached under older checks is checked again
# before it is imported (a 0-step or malformed file fetched by an older lab is refused then).
# 3: scores in range, aggregate counts matching the rows, steps within sane sizes (lab.published.checks).
CHECKS_VERSION = 3


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
            text = json.dumps(self._index, indent=1, sort_keys=True)
            write_atomic(self.index_path, lambda fh: fh.write(text))  # a fresh temporary file, never through a link

    def expected_sha(self, entry: Entry) -> str | None:
        return entry.sha256 or self.known(entry).get("sha256")


def file_facts(content: bytes, data: dict) -> dict:
    """size, sha256, model, score, steps and scoring version of one downloaded result file."""
    from lab.resultfiles.files import scoring_version

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


def verify_file(entry: Entry, content: bytes, expected_sha: str | None) -> dict:
    """Parse and check one complete file; LabError (naming the file) when it is not a result file."""
    sha = hashlib.sha256(content).hexdigest()
    if expected_sha and sha != expected_sha:
        raise LabError(f"{entry.path}: sha256 {sha[:12]}… does not match the expected {expected_sha[:12]}…; "
                       "the download was discarded (check LAB_PUBLISHED_BASE_URL, then fetch again)")
    from lab.resultfiles.files import parse_result_bytes

    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else f"{type(exc).__name__}: {str(exc)[:120]}"
        raise LabError(f"{entry.path}: the server did not send JSON ({why}); "
                       "the download was discarded (check LAB_PUBLISHED_BASE_URL)") from None
    if not isinstance(data, dict) or not isinstance(data.get("per_step"), list):
        raise LabError(f"{entry.path}: not a result file (no per_step list); the download was discarded")
    try:
        parse_result_bytes(content, entry.path)  # every field the lab reads: types, finite numbers, ranges
    except LabError as exc:
        raise LabError(f"{exc}; the download was discarded") from None
    if not data["per_step"]:
        raise LabError(f"{entry.path}: a run with no steps (per_step is empty); the download was discarded")
    limits = fetch_limits()
    check_values(entry.path, data, limits)  # scores in range, aggregate.steps/tasks matching the rows
    check_step_sizes(entry.path, data, limits)  # a step's units: what the equiv fill may have to handle
    return file_facts(content, data)
