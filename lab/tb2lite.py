"""Names from TB2-lite that every layer shares, in one home at the ground layer (settings needs them too):
the two versions of its scoring (SPEC §10: the corrected 303-step one, the default, and the legacy 386-step
one; `corrected` also names the replay mode that keeps the steps the corrected scorer counts, and the
replay file's version) and the harness's output contract, the default (lab.prompts.contracts holds them all)."""
from __future__ import annotations

CORRECTED = "corrected"
LEGACY = "legacy"
SCORER_NAMES = (CORRECTED, LEGACY)
REPLAY_MODES = (CORRECTED, "all")  # the steps a replay keeps: those the corrected scorer counts, or all
DEFAULT_CONTRACT = "tb2lite-json"
