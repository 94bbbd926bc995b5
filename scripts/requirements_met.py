"""Exit 0 when this Python already has every requirement of the given files (and the files they name with
`-r`), at a version each allows, with the requirements of the extras asked for; else print the first one
missing and exit 1. scripts/test.sh runs pip only then: pip's own check of a satisfied file costs ~8 s of CPU
at the start of every test run. Usage: python scripts/requirements_met.py requirements-test.txt"""
from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path


def requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a requirements file, the files it names with `-r` followed."""
    lines: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            lines += requirement_lines(path.parent / line.split(maxsplit=1)[1])
        elif line.startswith("-"):
            raise ValueError(f"{path}: option line {line!r}: let pip read this file")
        else:
            lines.append(line)
    return lines


def unmet(requirement, extra: str = "") -> str | None:
    """Why `requirement` (a packaging Requirement) is not met here; None when it is."""
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
        return None
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return f"{requirement.name} is not installed"
    if not requirement.specifier.contains(installed, prereleases=True):
        return f"{requirement.name} {installed} is installed, {requirement} is asked for"
    from packaging.requirements import Requirement

    for wanted in sorted(requirement.extras):
        for dependency in metadata.requires(requirement.name) or []:
            why = unmet(Requirement(dependency), wanted)
            if why:
                return f"{why} (for {requirement.name}[{wanted}])"
    return None


def main(files: list[str]) -> int:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        print("requirements_met: the `packaging` module is missing", file=sys.stderr)
        return 1
    try:
        for name in files:
            for line in requirement_lines(Path(name)):
                why = unmet(Requirement(line))
                if why:
                    print(f"requirements_met: {why}", file=sys.stderr)
                    return 1
    except (OSError, ValueError) as exc:
        print(f"requirements_met: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
