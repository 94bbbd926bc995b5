"""The tokens each decoding step of a batch adds: rows that ended (EOS, then padding) stop counting."""
from __future__ import annotations

import torch

from lab.engines.row_tokens import RowTokens

EOS, PAD = 2, 0


def count_all(counter: RowTokens, steps: list[list[int]]) -> list[int]:
    return [counter.count(torch.tensor(step)) for step in steps]


def test_a_row_counts_its_eos_then_nothing_after_it():
    # row 0 ends at step 2 (EOS counted), then pads; row 1 runs on; row 2 ends at once
    steps = [[5, 6, EOS], [EOS, 7, PAD], [PAD, 8, PAD], [PAD, 9, PAD]]
    assert count_all(RowTokens({EOS}, PAD), steps) == [3, 2, 1, 1]


def test_pad_that_is_the_eos_token():
    steps = [[5, EOS], [EOS, EOS], [EOS, EOS]]
    assert count_all(RowTokens({EOS}, EOS), steps) == [2, 1, 0]


def test_a_row_cut_by_a_stop_string_stops_at_its_first_pad():
    # a stop string ends row 0 after step 1 (no EOS): generate pads it from then on, and the pad is no token
    steps = [[5, 6], [PAD, 7], [PAD, EOS]]
    assert count_all(RowTokens({EOS}, PAD), steps) == [2, 1, 1]


def test_without_eos_or_pad_every_row_counts():
    assert count_all(RowTokens(set(), None), [[1, 2], [3, 4]]) == [2, 2]
