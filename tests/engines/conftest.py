"""Fixtures only the engine tests use: the tiny model with a short context, a LoRA adapter for it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.engines.loading import MODEL_BUILD_LOCK
from tests.conftest import save_tiny_model


@pytest.fixture(scope="session")
def short_context_model_dir(tmp_path_factory) -> Path:
    """The tiny model with only 4096 positions in its config: the excerpt's longest steps do not fit."""
    return save_tiny_model(tmp_path_factory.mktemp("short-ctx"), hidden=32, heads=4, kv_heads=2, positions=4096)


@pytest.fixture(scope="session")
def tiny_lora_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """A peft LoRA adapter (rank 4 on q/v projections) saved for the tiny model."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("tiny-lora")
    with MODEL_BUILD_LOCK:  # never while an engine of this process builds its model (lab.engines.loading)
        base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # non-zero B so the adapter changes the output
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    peft_model.save_pretrained(folder)
    assert json.loads((folder / "adapter_config.json").read_text())["r"] == 4
    return folder
