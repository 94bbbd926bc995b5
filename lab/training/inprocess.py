"""A checkpoint replayed on the model in memory: a `transformers:` engine that adopts the training's model.

The engine's SPEC names the saved checkpoint exactly as `python -m lab replay --engine` would load it (a
full model's folder, or the base model with `lora=` the adapter folder for a peft model), with the
model's own device and dtype, so the result file says how to replay the same checkpoint from disk, and
greedy answers agree token for token. The model is neither copied nor moved; the engine lends it per
call (lab.engines.borrowed_model) and hands it back as it was.
"""
from __future__ import annotations

from pathlib import Path

from lab.engines.registry import create_engine
from lab.engines.transformers_engine import TransformersEngine
from lab.errors import LabError
from lab.training.options import EvalOptions, engine_spec


def peft_base(model) -> str | None:
    """The base model a peft model was made on (its adapter config's `base_model_name_or_path`), or None."""
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict) or not configs:
        return None
    config = configs.get(getattr(model, "active_adapter", "default")) or next(iter(configs.values()))
    return getattr(config, "base_model_name_or_path", None) or None


def in_memory_spec(model, folder: Path, options: EvalOptions, device: str | None = None,
                   tokenizer: Path | None = None) -> str:
    """The `transformers:` SPEC that loads the checkpoint in `folder` as the model in memory is (on `device`
    when given, rendering with the tokenizer saved in `tokenizer` when given)."""
    first = next(model.parameters(), None)
    if first is None:
        raise LabError("the model has no parameters to generate with")
    device = device or str(first.device)
    dtype = str(first.dtype).removeprefix("torch.")
    extra = {"device": device, "dtype": dtype, **({"tokenizer": str(tokenizer)} if tokenizer else {})}
    base = peft_base(model)
    if base is not None:
        return engine_spec("transformers", base, {**options.spec_options(), "lora": str(folder), **extra})
    return engine_spec("transformers", str(folder), {**options.spec_options(), **extra})


def in_memory_engine(model, tokenizer, folder: Path, options: EvalOptions) -> TransformersEngine:
    """The engine that replays `model` as it is now (named after `folder`, its checkpoint)."""
    if tokenizer is None:
        raise LabError("no tokenizer to render prompts with: give the Trainer a processing_class, or the callback "
                       "tokenizer=")
    engine = create_engine(in_memory_spec(model, folder, options))
    engine.adopt(model, tokenizer)
    return engine


def has_tokenizer(folder: Path) -> bool:
    """Whether a saved folder holds a tokenizer (the trainer saves its processing_class with each checkpoint)."""
    return (Path(folder) / "tokenizer_config.json").is_file()


def saved_tokenizer(tokenizer, folder: Path) -> Path:
    """`tokenizer` saved once into `folder` (for a worker loading checkpoints saved without one)."""
    if not has_tokenizer(folder):
        tokenizer.save_pretrained(str(folder))
    return folder
