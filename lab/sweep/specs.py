"""Engine SPEC patterns of a sweep: `{100..500..100}` ranges, globs over checkpoint folders, `@FILE` lists."""
from __future__ import annotations

import glob
import itertools
import re
from functools import lru_cache
from pathlib import Path

from lab.errors import LabError
from lab.settings import read_limits

LIMITS_PATH = Path(__file__).with_name("limits.yaml")
LIMITS_ENV = "LAB_SWEEP_LIMITS"  # the owner's own limits: a file with the keys of limits.yaml
_RANGE = re.compile(r"\{(\d+)\.\.(\d+)(?:\.\.(\d+))?\}")
_GLOB = re.compile(r"[*\[]")  # `?` starts a SPEC's options, so it is no wildcard here


@lru_cache(maxsize=1)
def limits() -> dict[str, int]:
    """The limits of limits.yaml, with those of $LAB_SWEEP_LIMITS (when set) over them."""
    shipped = read_limits(LIMITS_PATH, "", "the sweep limits")
    return {k: int(v) for k, v in {**shipped, **read_limits(LIMITS_PATH, LIMITS_ENV, "the sweep limits")}.items()}


def _too_many(spec: str, count: int) -> LabError:
    cap = limits()["max_engines"]
    return LabError(f"{spec[:200]}: expands to {count:,} engines, over the sweep's limit of {cap:,} "
                    f"(max_engines in {LIMITS_ENV} or lab/sweep/limits.yaml); narrow the range or split the sweep")


def _ranges(spec: str) -> list[str]:
    """Every `{LOW..HIGH..STEP}` of `spec` expanded (several multiply); counted before any is built."""
    matches = list(_RANGE.finditer(spec))
    if len(matches) > limits()["max_ranges"]:
        raise LabError(f"{spec[:200]}: {len(matches):,} {{LOW..HIGH}} ranges in one SPEC, over the sweep's limit of "
                       f"{limits()['max_ranges']} (max_ranges in {LIMITS_ENV} or lab/sweep/limits.yaml)")
    count = 1
    for match in matches:
        if max(len(g or "") for g in match.groups()) > 18:
            raise LabError(f"{spec[:200]}: a range's numbers have at most 18 digits")
        low, high, step = int(match[1]), int(match[2]), int(match[3] or 1)
        if step < 1 or high < low:
            raise LabError(f"{spec[:200]}: a range is {{LOW..HIGH..STEP}} with LOW <= HIGH and STEP >= 1")
        count *= (high - low) // step + 1
    if count > limits()["max_engines"]:
        raise _too_many(spec, count)
    return _expand(spec)


def _expand(spec: str) -> list[str]:
    """Every combination of the ranges' values, in order (the first range varies slowest)."""
    matches = list(_RANGE.finditer(spec))
    if not matches:
        return [spec]
    pieces = [spec[start:end] for start, end in
              zip([0, *(m.end() for m in matches)], [*(m.start() for m in matches), len(spec)])]
    values = [range(int(m[1]), int(m[2]) + 1, int(m[3] or 1)) for m in matches]
    return ["".join(p + str(v) for p, v in zip(pieces, combo)) + pieces[-1] for combo in itertools.product(*values)]


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
    from lab.engines.registry import engine_class

    if not engine_class(kind.strip()).stored_run or not sep or not path.strip() or Path(path.strip()).expanduser().is_absolute():
        return spec
    local = Path(path.strip())
    return f"stored:{local.resolve()}{qmark}{options}" if local.exists() else spec


def _spec_file(spec: str, reading: tuple[Path, ...]) -> list[str]:
    """The SPEC lines of `@FILE` (# comments and blank lines left out), refusing a file that names itself
    (directly or through others) or nests deeper than the limit."""
    path = Path(spec[1:])
    if not path.is_file():
        raise LabError(f"{path}: no such SPEC file")
    if path.resolve() in reading:
        raise LabError(f"{path}: the SPEC file names itself (through {' -> '.join(p.name for p in reading)})")
    if len(reading) >= limits()["max_file_depth"]:
        raise LabError(f"{path}: SPEC files nest deeper than {limits()['max_file_depth']} (@FILE inside @FILE)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabError(f"{path}: cannot read this SPEC file ({exc.__class__.__name__}); give a UTF-8 text file") from None
    lines = [ln.strip() for ln in text.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def expand_specs(specs: list[str], _reading: tuple[Path, ...] = ()) -> list[str]:
    """Every engine SPEC of a sweep, in order: `@FILE` reads one SPEC per line (# comments), patterns expand;
    relative `stored:` paths become absolute (see anchored). More than `max_engines` (limits.yaml) is
    refused by name before anything is built."""
    out: list[str] = []
    for spec in specs:
        if spec.startswith("@"):
            out += expand_specs(_spec_file(spec, _reading), (*_reading, Path(spec[1:]).resolve()))
        else:
            for ranged in _ranges(spec):
                out += [anchored(s) for s in _globbed(ranged)]
        if len(out) > limits()["max_engines"]:
            raise _too_many(spec, len(out))
    return out
