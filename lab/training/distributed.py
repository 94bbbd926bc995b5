"""Evaluating on a multi-process run (DDP, accelerate): the main process alone, never a collective.

Only the world's process zero evaluates; the other ranks go on and wait for it at their next collective
(the gradient all-reduce of the next step), as they wait for it to write a checkpoint. Nothing here calls
a collective, so no rank can hang on one that the others never enter. What can still end a run is the
process group's own timeout (the trainer's `ddp_timeout`, 1800 s by default): the evaluation's budget is
therefore capped below it (options.yaml `ddp_margin_s`).

A model sharded across ranks (FSDP, DeepSpeed ZeRO-3) is not whole on the main process: generating with
it alone would wait forever for the other ranks' shards, so such runs evaluate the saved folder on vLLM.
"""
from __future__ import annotations

from lab.training.options import training_defaults


def world_size(args) -> int:
    return int(getattr(args, "world_size", 1) or 1)


def sharded_model(args) -> str | None:
    """Why the model in memory is not whole on one process (FSDP, ZeRO-3), or None."""
    if getattr(args, "fsdp", None):
        return "FSDP shards the model across processes"
    try:
        from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

        if is_deepspeed_zero3_enabled():
            return "DeepSpeed ZeRO-3 shards the model across processes"
    except ImportError:
        pass
    return None


def capped_budget(budget_s: float | None, args) -> tuple[float | None, str | None]:
    """(the evaluation's budget on this run, a note when it was capped for the process group's timeout)."""
    if world_size(args) <= 1:
        return budget_s, None
    timeout = float(getattr(args, "ddp_timeout", 1800) or 1800)
    cap = max(timeout - float(training_defaults()["ddp_margin_s"]), timeout / 2)
    if budget_s is None or budget_s > cap:
        return cap, (f"evaluation budget {cap:.0f} s on {world_size(args)} processes (the others wait for it at "
                     f"their next collective; ddp_timeout is {timeout:.0f} s)")
    return budget_s, None
