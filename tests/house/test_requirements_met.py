"""scripts/requirements_met.py, which lets scripts/test.sh skip pip when nothing is missing: it says yes for
this environment's own requirement files and no, naming what, for a pin or a package it lacks, through files
named with `-r`. The real script on the real installed packages."""
from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tests.paths import REPO


def met(*files: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/requirements_met.py", *map(str, files)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_the_test_requirements_are_met_here():
    done = met("requirements-test.txt")
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_pin_or_a_package_this_python_lacks_is_named(tmp_path):
    installed = metadata.version("duckdb")
    (tmp_path / "inner.txt").write_text(f"# pinned elsewhere\nduckdb=={installed}.post999  # another build\n")
    (tmp_path / "outer.txt").write_text("-r inner.txt\n")
    done = met(tmp_path / "outer.txt")
    assert done.returncode == 1
    assert done.stderr.strip() == f"requirements_met: duckdb {installed} is installed, duckdb=={installed}.post999 is asked for"
    (tmp_path / "missing.txt").write_text("no-such-package-of-the-lab==1.0\n")
    assert met(tmp_path / "missing.txt").stderr.strip() == "requirements_met: no-such-package-of-the-lab is not installed"
    (tmp_path / "options.txt").write_text("--index-url https://example.invalid/simple\nduckdb\n")
    done = met(tmp_path / "options.txt")
    assert done.returncode == 1 and "let pip read this file" in done.stderr  # options: pip decides
