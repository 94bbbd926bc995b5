"""A saved slice as a fixed set of steps, to follow along a checkpoint series (e.g. the steps trained on vs
the held-out ones): the step keys the slice holds over the runs it names, or over every run when it names
none (a filter on a run's own values, such as F1 ≤ 0.2, keeps a step any of those runs meets)."""
from __future__ import annotations

from typing import Any

from lab.triage.saved import load_slice
from lab.triage.slices import slice_steps


def slice_step_keys(store: Any, name: str) -> list[str]:
    """The distinct step keys of saved slice `name` (LabError for a name not saved)."""
    spec = load_slice(store, name)
    return sorted(set(slice_steps(store, spec, columns="s.step_key")["step_key"]))
