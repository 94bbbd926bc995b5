"""Where the lab keeps things, read once from arguments and the environment."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lab.booleans import parse_bool
from lab.tb2lite import CORRECTED, LEGACY

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The public replay file at a pinned commit, never `main` (which may change under a stored result):
# e208c018 is the commit holding the ECHO RLVR result files of 2026-06-12 (published_results.tsv),
# which were evaluated on the corrected 303-step file; 612f5755 holds the legacy 386-step manifest and
# the April 2026 runs scored on it (SPEC §1).
REPLAY_COMMITS = {
    CORRECTED: "e208c0181c86a002916e8ae4a08c820654c1a858",
    LEGACY: "612f57557b38fe621719258f21417fa88346982d",
}
REPLAY_URL_TEMPLATE = "https://raw.githubusercontent.com/LLM-OS-Models/Terminal/{commit}/tb2_lite/data/replay_full.jsonl"
DEFAULT_REPLAY_URL = REPLAY_URL_TEMPLATE.format(commit=REPLAY_COMMITS[CORRECTED])
LEGACY_REPLAY_URL = REPLAY_URL_TEMPLATE.format(commit=REPLAY_COMMITS[LEGACY])


def read_limits(default: Path, env: str, what: str) -> dict:
    """A limits file (YAML mapping): `default`, or the file the environment variable `env` names (the owner's
    own limits). LabError naming the file when it cannot be read."""
    import yaml

    from lab.errors import LabError

    path = Path(os.environ.get(env) or default)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        data, why = None, type(exc).__name__
    else:
        why = "not a mapping"
    if not isinstance(data, dict):
        where = f"{env}={path}" if os.environ.get(env) else str(path)
        raise LabError(f"{where}: cannot read {what} ({why})")
    return data


CACHE_NAME = "tb2lab"  # the lab's one cache folder under ~/.cache: downloads, logs, vLLM's CPU environment
OLD_CACHE_NAMES = ("tb2lite-lab",)  # earlier cache folders: their contents move into CACHE_NAME on first use


def cache_root() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache (as scripts/vllm_cpu_env.sh reads it)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def default_cache_dir() -> Path:
    """The lab's cache folder, ~/.cache/tb2lab ($LAB_CACHE_DIR replaces it). What an earlier version kept
    in ~/.cache/tb2lite-lab (the downloaded replay, published runs, server logs) is moved in first, so a
    cache made before still serves."""
    target = cache_root() / CACHE_NAME
    for name in OLD_CACHE_NAMES:
        move_cache_entries(cache_root() / name, target)
    return target


def move_cache_entries(old: Path, new: Path) -> None:
    """Move every entry of the folder `old` that `new` lacks into `new`; `old` goes once empty. An entry
    both hold stays in `old` (the newer folder's copy is used); a move another process made first, or one
    the file system refuses, is skipped (the entry is still read from where it is, or downloaded again)."""
    try:
        entries = sorted(old.iterdir()) if old.is_dir() and not old.is_symlink() else []
    except OSError:
        return
    if not entries:
        return
    try:
        new.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    for entry in entries:
        if (new / entry.name).exists() or (new / entry.name).is_symlink():
            continue
        try:
            os.rename(entry, new / entry.name)  # same file system (both under ~/.cache): atomic, nothing copied
        except OSError:
            continue
    try:
        old.rmdir()
    except OSError:
        pass


def env(name: str, default: str | None = None) -> str | None:
    """The lab's environment variable `name` (a LAB_* setting), or `default` when it is unset. Every LAB_*
    variable is read here (tests/house/test_settings_home.py); the rest of the lab asks these functions."""
    return os.environ.get(name, default)


def env_flag(name: str, default: bool = False) -> bool:
    """The LAB_* switch `name` (1/0, true/false, yes/no, on/off), `default` when unset or not a switch."""
    value = env(name)
    parsed = None if value is None else parse_bool(value)
    return default if parsed is None else parsed


def env_number(name: str, default: float) -> float:
    """The LAB_* variable `name` as a number, `default` when unset or not a number."""
    try:
        return float(env(name, default))
    except ValueError:
        return default


def on_space() -> bool:
    """Whether the lab runs on a Hugging Face Space (which sets SPACE_ID): public mode, the Space's proxies."""
    return bool(os.environ.get("SPACE_ID"))


@dataclass
class Settings:
    """Paths and switches of one lab instance.

    - `results_dir`: stored results shipped with the lab (leaderboard CSVs, result JSON files); $LAB_RESULTS.
    - `runs_dir`: where new replays are written (git-ignored), imported like any result file.
    - `db_path`: the DuckDB file, rebuilt from `results_dir` when missing or outdated.
    - `cache_dir`: downloads (the public replay file, published runs), server logs: $LAB_CACHE_DIR, else
      ~/.cache/tb2lab (default_cache_dir), where scripts/vllm_cpu_env.sh also makes vLLM's CPU environment.
    - `replay_sha256`, `replay_size`: what a downloaded replay file must be ($LAB_REPLAY_SHA256,
      $LAB_REPLAY_SIZE; unset: not checked), besides the format and the size cap every download has.
    - `allow_engine_loading`: whether visitors may load model engines (off on a public Space).
    - `whatif_shared`: whether what-if edits made on the page go to the shared store (off on a public
      Space unless the owner sets LAB_WHATIF_SHARED=1: visitors' edits then stay in their session).
    - `ray_address`: the Ray cluster the Batch tab submits sweeps to ($LAB_RAY_ADDRESS; None: no cluster).
    """

    results_dir: Path = field(default_factory=lambda: Path(os.environ.get("LAB_RESULTS", PROJECT_ROOT / "results")))
    runs_dir: Path | None = None
    db_path: Path | None = None
    cache_dir: Path = field(default_factory=lambda: Path(os.environ.get("LAB_CACHE_DIR") or default_cache_dir()))
    replay_path: str | None = field(default_factory=lambda: os.environ.get("LAB_REPLAY") or None)
    replay_url: str = field(default_factory=lambda: os.environ.get("LAB_REPLAY_URL") or DEFAULT_REPLAY_URL)
    replay_sha256: str | None = field(default_factory=lambda: os.environ.get("LAB_REPLAY_SHA256") or None)
    replay_size: str | None = field(default_factory=lambda: os.environ.get("LAB_REPLAY_SIZE") or None)
    public: bool = field(default_factory=lambda: on_space() or env_flag("LAB_PUBLIC"))
    allow_engine_loading: bool | None = None
    whatif_shared: bool | None = None
    ray_address: str | None = field(default_factory=lambda: os.environ.get("LAB_RAY_ADDRESS", "").strip() or None)

    def __post_init__(self) -> None:
        self.results_dir = Path(self.results_dir)
        self.cache_dir = Path(self.cache_dir)
        if self.runs_dir is None:
            self.runs_dir = Path(os.environ.get("LAB_RUNS_DIR", self.results_dir / "runs"))
        self.runs_dir = Path(self.runs_dir)
        if self.db_path is None:
            self.db_path = Path(os.environ.get("LAB_DB", self.results_dir / "lab.duckdb"))
        self.db_path = Path(self.db_path)
        if self.allow_engine_loading is None:
            # Public deployments (HF Spaces) load no engines unless the owner sets LAB_ALLOW_ENGINES=1.
            self.allow_engine_loading = env_flag("LAB_ALLOW_ENGINES", default=not self.public)
        if self.whatif_shared is None:
            self.whatif_shared = env_flag("LAB_WHATIF_SHARED", default=not self.public)
