"""One scored TB2-lite step: the history the model sees and the reference reply."""
from __future__ import annotations

from dataclasses import dataclass, field

# Largest step/sample index a record may carry: a conversation has dozens of turns, so anything
# beyond is a broken record (and the results store keeps indices in 32-bit columns).
MAX_STEP_IDX = 100_000


def bucket_of(step_idx: int) -> str:
    """SPEC §6: step_idx <= 1 is early, 2-4 mid, >= 5 late (gap-containing step_idx)."""
    if step_idx <= 1:
        return "early"
    if step_idx <= 4:
        return "mid"
    return "late"


@dataclass(frozen=True)
class Step:
    """A replay step (SPEC §1). `messages` is the history *before* the reference turn."""

    task_id: str
    sample_idx: int
    step_idx: int
    total_steps: int
    is_final_step: bool
    source: str
    source_group: str
    messages: tuple[dict, ...]
    prompt: str
    ref_raw: str
    ref_parse_ok: bool = True
    line_no: int = 0
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def key(self) -> str:
        """Stable identifier `task-000/3` used across runs, the store and the UI."""
        return f"{self.task_id}/{self.step_idx}"

    @property
    def bucket(self) -> str:
        return bucket_of(self.step_idx)
