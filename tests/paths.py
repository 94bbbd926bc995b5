"""Where the shared reference data lives (never copied into the project)."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TB2LITE = REPO.parent / "shared" / "tb2lite"
EXCERPT = TB2LITE / "replay_excerpt.jsonl"
GOLDEN = TB2LITE / "golden_visible.jsonl"
