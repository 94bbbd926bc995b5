"""Every command's `--help` prints its usage: `python -m lab --help`, each command's and each nested command's
(argparse %-formats help strings, so one literal "95 %" once turned the top-level help into a traceback)."""
from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

from lab.cli import COMMANDS, NESTED, build_parser
from tests.paths import REPO


def help_of(argv: list[str]) -> str:
    """What `python -m lab ARGV --help` prints (the parser built as main() builds it), asserting exit 0."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as ended:
        build_parser(argv).parse_args([*argv, "--help"])
    assert ended.value.code == 0, argv
    return out.getvalue()


def every_command() -> list[list[str]]:
    return [[], *([name] for name in COMMANDS), *([name, sub] for name, subs in NESTED.items() for sub in subs)]


@pytest.mark.parametrize("argv", every_command(), ids=lambda argv: " ".join(argv) or "lab")
def test_every_help_prints_its_usage(argv):
    text = help_of(argv)
    assert text.startswith("usage: python -m lab"), text[:200]
    if not argv:
        assert all(name in text for name in COMMANDS)


def test_the_top_level_help_of_the_real_command():
    """The same through the process a user starts, with a help line holding a literal percent sign."""
    done = subprocess.run([sys.executable, "-m", "lab", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]
    assert "95 % interval" in done.stdout
