"""One cache folder (issue 41): the lab's downloads and logs and vLLM's CPU environment all live in
~/.cache/tb2lab (scripts/vllm_cpu_env.sh made it there already); what an earlier version kept in
~/.cache/tb2lite-lab moves in on first use, so a replay downloaded before still serves offline.
Real processes: `python -m lab data info` with its own HOME, and the script's own default read by bash."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from lab.data.sources import cached_replay_path
from lab.settings import DEFAULT_REPLAY_URL, default_cache_dir, move_cache_entries
from tests.paths import EXCERPT, REPO


def home_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LAB_CACHE_DIR", "XDG_CACHE_HOME", "LAB_REPLAY", "LAB_VLLM_ENV")}
    return {**env, "HOME": str(home), "HF_HUB_OFFLINE": "1", **extra}


def test_a_replay_cached_in_the_old_folder_serves_from_the_one_cache_folder(tmp_path):
    home = tmp_path / "home"
    old = home / ".cache" / "tb2lite-lab"
    cached = cached_replay_path(DEFAULT_REPLAY_URL, old)
    cached.parent.mkdir(parents=True)
    shutil.copy(EXCERPT, cached)
    (old / "published").mkdir()
    (old / "published" / "run.json").write_text("{}")
    done = subprocess.run([sys.executable, "-m", "lab", "data", "info"], cwd=REPO, env=home_env(home),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    new = home / ".cache" / "tb2lab"
    assert json.loads(done.stdout)["path"] == str(new / cached.name)  # no --replay, no LAB_REPLAY: the cached file
    assert (new / "published" / "run.json").read_text() == "{}"
    assert not old.exists(), "the old folder is emptied and removed"
    assert sorted(p.name for p in (home / ".cache").iterdir()) == ["tb2lab"]


def test_the_vllm_environment_script_uses_the_same_folder(tmp_path):
    """scripts/vllm_cpu_env.sh's default environment folder sits in the lab's cache folder."""
    script = (REPO / "scripts" / "vllm_cpu_env.sh").read_text()
    line = next(ln for ln in script.splitlines() if ln.startswith("ENV="))
    home = tmp_path / "home"
    shown = subprocess.run(["bash", "-c", f"set -u; {line}; echo \"$ENV\"", "x"], env=home_env(home),
                           capture_output=True, text=True, timeout=30).stdout.strip()
    env = home_env(home)
    probe = subprocess.run([sys.executable, "-c", "from lab.settings import Settings; print(Settings().cache_dir)"],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert Path(shown).parent == Path(probe.stdout.strip()) == home / ".cache" / "tb2lab"


def test_entries_both_folders_hold_stay_and_the_newer_copy_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    old, new = tmp_path / ".cache" / "tb2lite-lab", tmp_path / ".cache" / "tb2lab"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    (old / "replay.jsonl").write_text("old")
    (new / "replay.jsonl").write_text("new")
    (old / "logs").mkdir()
    assert default_cache_dir() == new
    assert (new / "replay.jsonl").read_text() == "new" and (old / "replay.jsonl").read_text() == "old"
    assert (new / "logs").is_dir() and not (old / "logs").exists()
    move_cache_entries(tmp_path / "nothing-here", new)  # a folder that is not there: nothing happens
    assert sorted(p.name for p in new.iterdir()) == ["logs", "replay.jsonl"]
