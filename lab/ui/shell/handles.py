"""What one tab may hold of another without importing it: the assembly (lab/ui/app.py) passes these in."""
from __future__ import annotations

from typing import Callable, Protocol


class CompareHandle(Protocol):
    """The part of the Compare tab the Engines tab uses."""

    warm: Callable[[], object] | None  # precompute the instant engines' columns in the background
