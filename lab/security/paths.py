"""Show paths relative to the lab's data folders, never as absolute server paths."""
from __future__ import annotations

import re
from pathlib import Path

from lab.settings import PROJECT_ROOT, Settings

# An absolute path in free text: a `/` not part of a URL (`http://host/x`) or of a relative path. It ends
# at `?` and `#`: in an engine SPEC (`vllm:/srv/m?preset=../../x`) those begin its options, not the path.
_ABS_PATH_RX = re.compile(r"(?<![\w./~-])/(?!/)[^\s'\"<>`,;()\[\]?#]+")


def _labels(settings: Settings) -> list[tuple[str, str]]:
    """(absolute prefix, label) pairs, longest prefix first."""
    runs, results = Path(settings.runs_dir).resolve(), Path(settings.results_dir).resolve()
    pairs = {
        str(results): "results",
        str(Path(settings.cache_dir).resolve()): "cache",
        str(PROJECT_ROOT): ".",
        str(Path.home()): "~",
    }
    if results not in runs.parents:  # LAB_RUNS_DIR elsewhere
        pairs[str(runs)] = "runs"
    return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


def display_path(path: str | Path, settings: Settings) -> str:
    """`path` relative to the runs, results or cache folder, the project or home (e.g.
    `results/runs/x.json`); any other absolute path shows as its file name only."""
    text = str(path)
    try:
        resolved = str(Path(text).expanduser().resolve())
    except (OSError, ValueError, RuntimeError):
        return Path(text).name
    for prefix, label in _labels(settings):
        if resolved == prefix:
            return label
        if resolved.startswith(prefix + "/"):
            rest = resolved[len(prefix) + 1:]
            return rest if label == "." else f"{label}/{rest}"
    return text if not Path(text).is_absolute() else f"…/{Path(text).name}"


def redact_paths(text: str | None, settings: Settings) -> str | None:
    """`text` with every absolute path replaced by its `display_path` (URLs are left alone)."""
    if not text:
        return text
    return _ABS_PATH_RX.sub(lambda m: display_path(m.group(0), settings), text)
