"""The tokens one decoding step of a batch adds, counted as they come: one for each row still generating.

`generate` pads a row that has ended (EOS, a stop string) with the pad token until the longest row ends;
those pads are no answer's tokens. A row's EOS counts (the answer keeps it, as vLLM does), a pad after the
row's end does not, so over a batch the counts add up to the answers' `completion_tokens`.
"""
from __future__ import annotations


class RowTokens:
    """Called once per decoding step with the batch's newest token of each row; says how many are real."""

    def __init__(self, eos_ids: set[int], pad_id: int | None) -> None:
        self.ends = sorted(eos_ids | ({pad_id} if pad_id is not None else set()))
        self.pad = pad_id if pad_id is not None and pad_id not in eos_ids else None  # a pad that is no EOS
        self.open = None  # rows still generating (a bool tensor, made at the first step)
        self._ends_tensor = None

    def count(self, newest) -> int:
        """Tokens the step that chose `newest` (one id per row) added; rows ending with it stop counting after it.

        One small comparison on the batch's device and one read of a single number per step: `generate`
        itself reads its rows' state once a step, so this adds no wait of its own."""
        import torch

        if self.open is None:
            self.open = torch.ones_like(newest, dtype=torch.bool)
            self._ends_tensor = torch.tensor(self.ends, dtype=newest.dtype, device=newest.device)
        real = self.open if self.pad is None else self.open & (newest != self.pad)
        added = int(real.sum())
        if self.ends:
            self.open = self.open & ~torch.isin(newest, self._ends_tensor)
        return added
