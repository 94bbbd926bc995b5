"""A model another program owns (a training run's), lent to an engine and handed back exactly as it was.

`BorrowedModel(model)` is a context manager. On entry it notes what generating or scoring could change
and puts the model in eval mode (no dropout); on exit, also after an exception, it puts back:

- each module's train/eval flag (not just the root's: a frozen tower a trainer keeps in eval stays there),
- each parameter's `requires_grad` and its `.grad` (the same tensor object, or None),
- the random number generators: Python's `random`, NumPy's global one, torch's CPU generator and every
  CUDA device's (when CUDA is initialised), so a seeded sampling run does not shift the training's
  dropout or data order,
- torch's intra-op thread count (an engine on CPU takes its share of threads while it generates),
- each parameter's and buffer's device (nothing here moves them; anything that did is moved back).

The model's weights are used in place: nothing is copied or reloaded.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Snapshot:
    """What `BorrowedModel` restores."""

    modes: list[tuple[Any, bool]] = field(default_factory=list)
    params: list[tuple[Any, bool, Any, Any]] = field(default_factory=list)  # (param, requires_grad, grad, device)
    buffers: list[tuple[Any, str, Any]] = field(default_factory=list)  # (owning module, name, device)
    python_rng: Any = None
    numpy_rng: Any = None
    torch_rng: Any = None
    cuda_rng: list | None = None
    threads: int = 0


def rng_states() -> tuple[Any, Any, Any, list | None]:
    """(Python, NumPy, torch CPU, torch CUDA per device or None) generator states."""
    import numpy as np
    import torch

    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return random.getstate(), np.random.get_state(), torch.get_rng_state(), cuda


def set_rng_states(python_rng: Any, numpy_rng: Any, torch_rng: Any, cuda_rng: list | None) -> None:
    """Put back generator states read by `rng_states`."""
    import numpy as np
    import torch

    random.setstate(python_rng)
    np.random.set_state(numpy_rng)
    torch.set_rng_state(torch_rng)
    if cuda_rng is not None:
        torch.cuda.set_rng_state_all(cuda_rng)


class BorrowedModel:
    """`with BorrowedModel(model): …` lends `model` in eval mode and restores it afterwards (module docstring)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._saved: _Snapshot | None = None

    def __enter__(self) -> Any:
        import torch

        snap = _Snapshot()
        snap.modes = [(m, m.training) for m in self.model.modules()]
        snap.params = [(p, p.requires_grad, p.grad, p.device) for p in self.model.parameters()]
        snap.buffers = [(owner, name, buf.device) for owner in self.model.modules()
                        for name, buf in owner.named_buffers(recurse=False) if buf is not None]
        snap.python_rng, snap.numpy_rng, snap.torch_rng, snap.cuda_rng = rng_states()
        snap.threads = torch.get_num_threads()
        self._saved = snap
        self.model.eval()
        return self.model

    def __exit__(self, *exc: object) -> None:
        import torch

        snap, self._saved = self._saved, None
        if snap is None:
            return
        for param, requires_grad, grad, device in snap.params:
            if param.device != device:
                param.data = param.data.to(device)
            param.requires_grad_(requires_grad)
            param.grad = grad
        for owner, name, device in snap.buffers:
            buf = getattr(owner, name, None)
            if buf is not None and buf.device != device:
                setattr(owner, name, buf.to(device))  # nn.Module keeps a registered buffer's name a buffer
        for module, training in snap.modes:
            module.training = training
        set_rng_states(snap.python_rng, snap.numpy_rng, snap.torch_rng, snap.cuda_rng)
        if torch.get_num_threads() != snap.threads:
            torch.set_num_threads(snap.threads)
