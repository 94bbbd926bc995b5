"""Numbers into the trainer's own log, so every `report_to` integration gets them at the right global step.

`Trainer.log` appends to `state.log_history` and calls every callback's `on_log` (TensorBoard, trackio,
W&B, MLflow … are such callbacks) at `state.global_step`. A callback is not handed its trainer, so
the callback finds the one that runs it: the `Trainer` (TRL's trainers are subclasses) whose method is
on the call stack when training begins (`calling_trainer`), unless it was given one. Without a trainer
(a training loop of one's own that calls the callbacks), the numbers still go into `state.log_history`.
"""
from __future__ import annotations

import inspect
import logging

logger = logging.getLogger("lab.training")
STACK_DEPTH = 16  # frames looked through: the trainer's method -> the callback handler -> this callback


def calling_trainer():
    """The `transformers.Trainer` whose method called into the current callback, or None."""
    from transformers import Trainer

    frame = inspect.currentframe()
    try:
        for _ in range(STACK_DEPTH):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, Trainer):
                return candidate
        return None
    finally:
        del frame


def log_metrics(trainer, state, control, metrics: dict[str, float]) -> None:
    """Log `metrics` through `trainer.log` (at its global step), else into `state.log_history` alone.

    The trainer's log event clears `control.should_log`; between a step's end and the trainer's own log
    of that step (an evaluation every N steps) that would drop the step's loss from the log and fold it
    into the next one, so the flag is put back as it was."""
    if trainer is not None:
        keep = bool(getattr(control, "should_log", False))
        trainer.log(dict(metrics))
        for flags in {id(c): c for c in (control, getattr(trainer, "control", None)) if c is not None}.values():
            flags.should_log = keep
        return
    state.log_history.append({**metrics, "step": state.global_step})
    logger.info("%s", {**metrics, "step": state.global_step})
