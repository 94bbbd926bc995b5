"""Numbers into the trainer's own log, so every `report_to` integration gets them at the right global step.

`Trainer.log` appends to `state.log_history` and calls every callback's `on_log` (TensorBoard, trackio,
W&B, MLflow … are such callbacks) at `state.global_step`. A callback is not handed its trainer, so
the callback finds the one that runs it: the `Trainer` (TRL's trainers are subclasses) whose method is
on the call stack when training begins (`calling_trainer`), unless it was given one. Without a trainer
(a training loop of one's own that calls the callbacks), the numbers still go into `state.log_history`.

A result that arrives from the evaluation beside training belongs to the save it evaluated, not to the step
training has reached: `log_at_step` hands it to every callback's `on_log` with the save's global step, so
TensorBoard writes the point at that step and MLflow records it there; for loggers whose own step may only
increase (W&B), the numbers carry that step as a metric of their own (options.yaml `step_metric`), and the
Hugging Face W&B integration's x-axis (`train/global_step`) is that step too.
"""
from __future__ import annotations

import copy
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


def log_at_step(trainer, args, state, control, step: int, metrics: dict[str, float], step_metric: str) -> None:
    """Log `metrics` as if at global step `step` (module docstring): into `state.log_history` with that step,
    and through the trainer's callbacks' `on_log` with a copy of the state at that step; `control.should_log`
    is left as it was."""
    logs = {**metrics, step_metric: float(step)}
    state.log_history.append({**logs, "step": int(step)})
    if trainer is None:
        logger.info("%s", {**logs, "step": step})
        return
    at_step = copy.copy(state)  # (shallow: the log history is the trainer's own list, untouched by on_log)
    at_step.global_step = int(step)
    keep = bool(getattr(control, "should_log", False))
    trainer.callback_handler.on_log(args, at_step, control, logs)
    control.should_log = keep
