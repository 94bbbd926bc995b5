"""The catalogue of public per-step result files (`assets/published/catalogue.csv`).

Built once from a list of `path, commit, kind` rows (the public repository's result files):
status files are left out, shards and parts of one run share a `run` key (so they import as one
run), and series (checkpoint or epoch runs of one model) are recognised from the names with the
rules in `assets/published/series.yaml`. Sizes and sha256 are known for files seen byte for byte;
the rest are learnt when fetched (lab/published/cache.py keeps them in the cache index).
"""
from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

import yaml

from lab.errors import LabError
from lab.settings import PROJECT_ROOT

ASSETS = PROJECT_ROOT / "assets" / "published"
CATALOGUE_PATH = ASSETS / "catalogue.csv"
RULES_PATH = ASSETS / "series.yaml"
COLUMNS = ("run", "path", "commit", "kind", "role", "piece", "series", "x_kind", "x", "size", "sha256")
RESULTS_PREFIX = "tb2_lite/results/"


@dataclass(frozen=True)
class Entry:
    """One public file of the catalogue."""

    run: str            # the run it belongs to ("<folder>/<name>"); also its file under results/published/
    path: str           # repository path
    commit: str
    kind: str           # full | shard | part | smoke | sample (as listed)
    role: str           # whole (the file is the complete run) | piece (a shard or part)
    piece: int | None   # the piece number (merge order)
    series: str | None
    x_kind: str | None  # checkpoint step | epoch
    x: int | None
    size: int | None
    sha256: str | None


@dataclass(frozen=True)
class Run:
    """A run of the catalogue: the files that make it (one whole file, or its pieces in order)."""

    key: str
    files: tuple[Entry, ...]
    pieces: tuple[Entry, ...]
    kind: str
    series: str | None
    x_kind: str | None
    x: int | None

    @property
    def size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SeriesRules:
    piece: re.Pattern
    whole_suffixes: tuple[str, ...]
    status: re.Pattern
    series: tuple[tuple[str, re.Pattern, str], ...]
    generic: re.Pattern
    final_suffix: str = ""


@lru_cache(maxsize=1)
def load_rules(path: Path = RULES_PATH) -> SeriesRules:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    return SeriesRules(
        piece=re.compile(raw["piece_pattern"]),
        whole_suffixes=tuple(raw["whole_suffixes"]),
        status=re.compile(raw["status_pattern"]),
        series=tuple((s["name"], re.compile(s["regex"]), s["x_kind"]) for s in raw["series"]),
        generic=re.compile(raw["generic_checkpoint"]),
        final_suffix=str(raw.get("final_suffix") or ""),
    )


def classify(path: str, rules: SeriesRules | None = None) -> dict:
    """run key, role, piece, series, x_kind and x of one repository path (pure: names only)."""
    rules = rules or load_rules()
    rel = path[len(RESULTS_PREFIX):] if path.startswith(RESULTS_PREFIX) else path
    p = PurePosixPath(rel)
    stem = p.name[:-5] if p.name.endswith(".json") else p.name
    piece = None
    m = rules.piece.search(stem)
    if m:
        piece, stem = int(m.group(1)), stem[: m.start()]
    role = "piece" if piece is not None else "whole"
    for suffix in rules.whole_suffixes:
        if stem.endswith(suffix) and role == "whole":
            stem = stem[: -len(suffix)]
            break
    run = f"{p.parent.as_posix()}/{stem}" if p.parent.as_posix() != "." else stem
    series = x_kind = x = None
    for name, rx, kind in rules.series:
        sm = rx.search(stem)
        if sm:
            series, x_kind, x = name, kind, int(sm.group(1))
            break
    else:
        gm = rules.generic.match(stem)
        if gm:
            series, x_kind, x = gm.group(1).strip("-_") or stem, "checkpoint step", int(gm.group(2))
    return {"run": run, "role": role, "piece": piece, "series": series, "x_kind": x_kind, "x": x}


def build_catalogue(listing: Path, known_files: Path | None = None) -> list[dict]:
    """Catalogue rows from a `path<TAB>commit<TAB>kind` listing; status files left out. Files found
    by name in `known_files` (exact copies) get their size and sha256."""
    rules = load_rules()
    with open(listing, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    out = []
    for row in rows:
        path, kind = row["path"].strip(), row["kind"].strip()
        if kind == "status" or rules.status.search(PurePosixPath(path).name):
            continue
        size = sha = None
        if known_files is not None and (known_files / PurePosixPath(path).name).is_file():
            data = (known_files / PurePosixPath(path).name).read_bytes()
            size, sha = len(data), hashlib.sha256(data).hexdigest()
        out.append({"path": path, "commit": row["commit"].strip(), "kind": kind, **classify(path, rules),
                    "size": size, "sha256": sha})
    out.sort(key=lambda r: (r["run"], r["piece"] if r["piece"] is not None else -1))
    return join_finals(out, rules)


def join_finals(rows: list[dict], rules: SeriesRules | None = None) -> list[dict]:
    """Give each full `<stem>-final` run the series of its `<stem>-checkpoint-N` runs, one after the last."""
    rules = rules or load_rules()
    if not rules.final_suffix:
        return rows
    last: dict[str, int] = {}
    for r in rows:
        if r.get("series") and r.get("x") not in (None, ""):
            last[r["series"]] = max(last.get(r["series"], 0), int(r["x"]))
    for r in rows:
        stem = str(r["run"]).rsplit("/", 1)[-1]
        base = stem[: -len(rules.final_suffix)] if stem.endswith(rules.final_suffix) else None
        if base and not r.get("series") and r.get("kind") == "full" and base in last:
            r["series"], r["x_kind"], r["x"] = base, "checkpoint step", last[base] + 1
    return rows


def write_catalogue(rows: list[dict], path: Path = CATALOGUE_PATH) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in COLUMNS})
    return path


def _opt_int(value: str) -> int | None:
    return int(value) if value not in ("", None) else None


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> tuple[Entry, ...]:
    with open(path, encoding="utf-8", newline="") as fh:
        return tuple(
            Entry(run=r["run"], path=r["path"], commit=r["commit"], kind=r["kind"], role=r["role"],
                  piece=_opt_int(r["piece"]), series=r["series"] or None, x_kind=r["x_kind"] or None,
                  x=_opt_int(r["x"]), size=_opt_int(r["size"]), sha256=r["sha256"] or None)
            for r in csv.DictReader(fh)
        )


def load_catalogue(path: Path | None = None) -> list[Entry]:
    """The shipped catalogue's entries (LabError when the file is missing)."""
    path = Path(path or CATALOGUE_PATH)
    if not path.is_file():
        raise LabError(f"published catalogue {path} not found; rebuild it with "
                       "`python -m lab data published catalogue --from published_results.tsv`")
    return list(_load(str(path), path.stat().st_mtime))


def runs_of(entries: list[Entry]) -> dict[str, Run]:
    """Run key -> Run: a run's files are its whole file when it has one, else its pieces in order."""
    grouped: dict[str, list[Entry]] = {}
    for e in entries:
        grouped.setdefault(e.run, []).append(e)
    runs = {}
    for key, members in grouped.items():
        wholes = [m for m in members if m.role == "whole"]
        pieces = tuple(sorted((m for m in members if m.role == "piece"), key=lambda m: m.piece or 0))
        files = (wholes[0],) if wholes else pieces
        first = files[0]
        runs[key] = Run(key, files, pieces, first.kind, first.series, first.x_kind, first.x)
    return runs


def series_names(entries: list[Entry]) -> dict[str, list[str]]:
    """Series name -> its run keys (series with at least two runs), ordered by position."""
    runs = runs_of(entries)
    out: dict[str, list[Run]] = {}
    for run in runs.values():
        if run.series:
            out.setdefault(run.series, []).append(run)
    return {name: [r.key for r in sorted(rs, key=lambda r: (r.x or 0, r.key))] for name, rs in sorted(out.items())
            if len(rs) >= 2}
