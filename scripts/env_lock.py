"""Is an environment exactly what a lock file says, and make it so.

    python scripts/env_lock.py check LOCK [--python PY]
    python scripts/env_lock.py sync LOCK --python PY [pip install options, e.g. --no-deps --find-links DIR]

`check` compares every distribution installed in PY's environment (default: this interpreter) with every
`name==version` line of LOCK (a file scripts/lock.sh makes): exit 0 only when both hold the same
distributions at the same versions (`pip` itself, the installer, aside; a locked `2.13.0` admits the local
build `2.13.0+cpu`, as pip's `==` does). Otherwise it prints each difference and exits 1.
`sync` runs `check`; on a difference it installs LOCK with pip, removes what LOCK does not name, and checks
again, so an environment reused by scripts/test.sh and one made afresh are the same. Standard library only:
it runs before anything is installed.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;#]+)")
INSTALLER = {"pip"}
LISTING = """
import json
from importlib import metadata
seen = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        seen.setdefault(name, []).append(dist.version)
print(json.dumps(seen))
"""


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    """name -> version of every pinned line of a lock file."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        found = PIN.match(line.strip())
        if found:
            pins[canonical(found.group(1))] = found.group(2)
    return pins


def installed(python: str) -> dict[str, list[str]]:
    """name -> the versions installed in `python`'s environment (more than one: a broken environment)."""
    done = subprocess.run([python, "-c", LISTING], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise OSError(f"{python} cannot list its distributions: {done.stderr.strip()[-400:]}")
    found: dict[str, list[str]] = {}
    for name, versions in json.loads(done.stdout).items():
        found.setdefault(canonical(name), []).extend(versions)
    return found


def same_version(installed_version: str, locked: str) -> bool:
    """PEP 440 `==locked` for a lock's plain release: equal, or the same release with a local label."""
    return installed_version == locked or ("+" not in locked and installed_version.split("+", 1)[0] == locked)


def differences(have: dict[str, list[str]], lock: dict[str, str]) -> list[str]:
    """Each way the installed distributions differ from the lock, one line each ([] when they agree)."""
    lines = []
    for name, version in sorted(lock.items()):
        versions = have.get(name, [])
        if not versions:
            lines.append(f"{name} is not installed ({name}=={version} is locked)")
        elif len(versions) > 1:
            lines.append(f"{name} is installed {len(versions)} times ({', '.join(versions)}); {version} is locked")
        elif not same_version(versions[0], version):
            lines.append(f"{name} {versions[0]} is installed, {name}=={version} is locked")
    lines += [f"{name} {', '.join(have[name])} is installed and not in the lock"
              for name in sorted(set(have) - set(lock) - INSTALLER)]
    return lines


def extras(have: dict[str, list[str]], lock: dict[str, str]) -> list[str]:
    """Installed distributions the lock does not name (the installer aside)."""
    return sorted(set(have) - set(lock) - INSTALLER)


def check(lock_path: Path, python: str, quiet: bool = False) -> bool:
    """True when `python`'s environment is exactly the lock; otherwise print the differences."""
    found = differences(installed(python), read_lock(lock_path))
    if found and not quiet:
        shown = found[:12] + ([f"… and {len(found) - 12} more"] if len(found) > 12 else [])
        print(f"env_lock: {python} is not {lock_path}:\n  " + "\n  ".join(shown), file=sys.stderr)
    return not found


def pip(python: str, *args: str) -> None:
    """Run pip of `python`'s environment; its failure ends the sync with pip's own words."""
    done = subprocess.run([python, "-m", "pip", *args], timeout=3600)
    if done.returncode != 0:
        raise OSError(f"pip {args[0]} failed (exit {done.returncode})")


def sync(lock_path: Path, python: str, pip_options: list[str]) -> bool:
    """Make `python`'s environment exactly the lock: install it, remove what it does not name, check again."""
    if check(lock_path, python, quiet=True):
        print(f"env_lock: {python} is {lock_path} already", file=sys.stderr)
        return True
    check(lock_path, python)
    print(f"env_lock: installing {lock_path} into {python}'s environment …", file=sys.stderr)
    pip(python, "install", "-q", *pip_options, "-r", str(lock_path))
    left = extras(installed(python), read_lock(lock_path))
    if left:
        print(f"env_lock: removing what {lock_path} does not name: {', '.join(left)}", file=sys.stderr)
        pip(python, "uninstall", "-q", "-y", *left)
    return check(lock_path, python)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("check", "sync"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    verb, lock_path, rest = argv[0], Path(argv[1]), argv[2:]
    python = sys.executable
    if rest[:1] == ["--python"] and len(rest) >= 2:
        python, rest = rest[1], rest[2:]
    if verb == "check" and rest:
        print(f"env_lock: check takes LOCK and --python PY only, not {' '.join(rest)}", file=sys.stderr)
        return 2
    if not lock_path.is_file():
        print(f"env_lock: no lock file {lock_path}", file=sys.stderr)
        return 2
    try:
        ok = check(lock_path, python) if verb == "check" else sync(lock_path, python, rest)
    except (OSError, ValueError) as exc:
        print(f"env_lock: {exc}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
