"""The transformers engine on a model already in memory (`adopt`): no copy, no move, everything put back.

A training run lends its model between optimizer steps: after a generate (seeded sampling, which reseeds
torch) and a reference score, the model's train/eval flags (a submodule kept in eval included), each
parameter's requires_grad and .grad object, every RNG state (Python, NumPy, torch CPU), torch's thread
count and every tensor's device must be exactly as before, and the answers must be those of the same
checkpoint loaded from disk.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from lab.engines import Request, Sampling, create_engine
from lab.engines.borrowed_model import BorrowedModel, rng_states
from tests.engines.test_engines_transformers import STEP, chat_prompts


@pytest.fixture()
def training_model(tiny_model_dir):
    """The tiny model as a trainer holds it: train mode, one module frozen in eval, gradients present."""
    import torch
    from transformers import AutoModelForCausalLM

    from lab.engines.loading import MODEL_BUILD_LOCK

    with MODEL_BUILD_LOCK:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attention_dropout=0.1)
    model.train()
    model.model.layers[0].mlp.eval()  # a frozen tower a trainer keeps in eval
    model.model.norm.weight.requires_grad_(False)
    loss = model(input_ids=torch.tensor([[5, 6, 7, 8]]), labels=torch.tensor([[5, 6, 7, 8]])).loss
    loss.backward()
    return model


def _state(model) -> dict:
    import torch

    return {
        "modes": [(name, m.training) for name, m in model.named_modules()],
        "grad_flags": [(name, p.requires_grad) for name, p in model.named_parameters()],
        "grad_ids": [(name, id(p.grad) if p.grad is not None else None) for name, p in model.named_parameters()],
        "devices": [(name, str(t.device)) for name, t in [*model.named_parameters(), *model.named_buffers()]],
        "weights": {name: p.detach().clone() for name, p in model.named_parameters()},
        "threads": torch.get_num_threads(),
    }


def _same_rng(before, after) -> bool:
    import torch

    return (before[0] == after[0] and all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                                          for a, b in zip(before[1], after[1]))
            and torch.equal(before[2], after[2]))


def test_an_adopted_model_is_handed_back_exactly(training_model, tiny_model_dir):
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "right"  # the trainer's choice: the engine pads left on its own copy
    random.seed(11), np.random.seed(12), torch.manual_seed(13)
    torch.set_num_threads(1)
    before, rng_before = _state(training_model), rng_states()
    engine = create_engine(f"transformers:{tiny_model_dir}?batch_size=2")
    engine.adopt(training_model, tokenizer)
    assert engine.model is training_model and engine.device == "cpu" and engine.dtype == "float32"
    prompts = chat_prompts(engine.tokenizer, 3)
    sampled = engine.generate([Request(STEP, p) for p in prompts], Sampling(temperature=1.0, max_tokens=6, seed=5))
    assert all(c.error is None and c.completion_tokens for c in sampled)
    scored = engine.score_reference(prompts[0], '{"commands": []}')
    assert scored.error is None and scored.logprobs
    engine.close()
    after, rng_after = _state(training_model), rng_states()
    assert tokenizer.padding_side == "right" and engine.tokenizer is None
    for key in ("modes", "grad_flags", "grad_ids", "devices", "threads"):
        assert after[key] == before[key], key
    assert all(torch.equal(before["weights"][n], after["weights"][n]) for n in before["weights"])
    assert _same_rng(rng_before, rng_after)
    # the dropout the training relies on still runs, with the generator where it was
    assert training_model.training and training_model.model.layers[0].self_attn.training


def test_an_adopted_model_answers_as_its_saved_folder(training_model, tiny_model_dir, tmp_path):
    """Greedy answers and their log-probabilities are the same as the engine loading the saved checkpoint."""
    from transformers import AutoTokenizer

    training_model.save_pretrained(tmp_path / "checkpoint-1")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "checkpoint-1")
    spec = f"transformers:{tmp_path / 'checkpoint-1'}?device=cpu&dtype=float32&batch_size=2"
    from_disk = create_engine(spec)
    from_disk.load()
    in_memory = create_engine(spec)
    in_memory.adopt(training_model, AutoTokenizer.from_pretrained(tmp_path / "checkpoint-1"))
    prompts = chat_prompts(from_disk.tokenizer, 3)
    sampling = Sampling(max_tokens=8)
    a = from_disk.generate([Request(STEP, p) for p in prompts], sampling)
    b = in_memory.generate([Request(STEP, p) for p in prompts], sampling)
    assert [(c.text, c.token_ids, c.logprobs.to_record()) for c in a] == [(c.text, c.token_ids, c.logprobs.to_record())
                                                                          for c in b]
    from_disk.close(), in_memory.close()


def test_the_snapshot_is_restored_after_an_exception(training_model):
    import torch

    before, rng_before = _state(training_model), rng_states()
    with pytest.raises(RuntimeError, match="boom"):
        with BorrowedModel(training_model):
            assert not training_model.training
            torch.manual_seed(99)
            training_model.model.norm.weight.requires_grad_(True)
            raise RuntimeError("boom")
    after = _state(training_model)
    assert after["modes"] == before["modes"] and after["grad_flags"] == before["grad_flags"]
    assert _same_rng(rng_before, rng_states())
