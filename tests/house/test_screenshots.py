"""scripts/screenshots.py makes the documentation's pictures from the real app: run it (Chromium, the tiny
model, the lab's own replays) for two of them into a scratch folder and check what it wrote."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import EXCERPT, REPO

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian chromium is not installed"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


def test_the_script_makes_the_pictures_it_declares(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    import screenshots

    wanted = ["engines.png", "results.png"]
    done = subprocess.run([sys.executable, "scripts/screenshots.py", "--out", str(tmp_path), "--only", *wanted],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == wanted
    for name in wanted:
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and 10_000 < len(png) <= screenshots.MAX_BYTES, (name, len(png))
