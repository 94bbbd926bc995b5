"""Engine SPEC patterns of a sweep: `{100..500..100}` ranges, globs over checkpoint folders, `@FILE` lists."""
from __future__ import annotations

import glob
import re
from pathlib import Path

from lab.errors import LabError

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)(?:\.\.(\d+))?\}")
_GLOB = re.compile(r"[*\[]")  # `?` starts a SPEC's options, so it is no wildcard here


def _ranges(spec: str) -> list[str]:
    match = _RANGE.search(spec)
    if match is None:
        return [spec]
    low, high, step = int(match[1]), int(match[2]), int(match[3] or 1)
    if step < 1 or high < low:
        raise LabError(f"{spec}: a range is {{LOW..HIGH..STEP}} with LOW <= HIGH and STEP >= 1")
    head, tail = spec[: match.start()], spec[match.end():]
    return [s for n in range(low, high + 1, step) for s in _ranges(f"{head}{n}{tail}")]


def _globbed(spec: str) -> list[str]:
    kind, sep, target = spec.partition(":")
    path, qmark, options = target.partition("?")
    if not sep or not _GLOB.search(path):
        return [spec]
    found = sorted(glob.glob(path))
    if not found:
        raise LabError(f"{spec}: the pattern matches nothing")
    return [f"{kind}:{p}{qmark}{options}" for p in found]


def anchored(spec: str) -> str:
    """`stored:` with a relative path that exists here made absolute: a worker's folder is not the driver's."""
    kind, sep, target = spec.partition(":")
    path, qmark, options = target.partition("?")
    if kind.strip() != "stored" or not sep or not path.strip() or Path(path.strip()).expanduser().is_absolute():
        return spec
    local = Path(path.strip())
    return f"stored:{local.resolve()}{qmark}{options}" if local.exists() else spec


def expand_specs(specs: list[str]) -> list[str]:
    """Every engine SPEC of a sweep, in order: `@FILE` reads one SPEC per line (# comments), patterns expand;
    relative `stored:` paths become absolute (see anchored)."""
    out: list[str] = []
    for spec in specs:
        if spec.startswith("@"):
            path = Path(spec[1:])
            if not path.is_file():
                raise LabError(f"{path}: no such SPEC file")
            lines = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()]
            out += expand_specs([ln for ln in lines if ln and not ln.startswith("#")])
            continue
        for ranged in _ranges(spec):
            out += [anchored(s) for s in _globbed(ranged)]
    return out
