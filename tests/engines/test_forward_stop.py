"""cancel() ends an in-process generate inside its prefill (lab.engines.forward_stop), and leaves no hook behind.

The tiny model's prefill of the excerpt's longest prompt (about 10,800 tokens) is one forward pass of seconds
on a CPU, with no decoding step in it where a stopping criterion could look: a cancel now ends it at the next
module, the batch is dropped (never an answer), and the model keeps no hook, so the next generate (or a
training run that lent the model) runs as before.
"""
from __future__ import annotations

import threading
import time

import pytest

from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


def _hooks(model) -> int:
    return sum(len(m._forward_pre_hooks) for m in model.modules())


def test_a_cancel_ends_a_long_prefill_at_its_next_module(tiny_model_dir):
    from lab.data import load_replay
    from lab.engines.base import Request
    from lab.engines.registry import create_engine
    from lab.prompts.engine_prompt import render_for_engine

    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&batch_size=1&max_tokens=4")
    engine.load()
    try:
        step = max(load_replay(EXCERPT).steps, key=lambda s: len(s.prompt))
        prompt = render_for_engine(engine, step).text
        started = time.perf_counter()
        engine.generate([Request(step, prompt)], engine.default_sampling)
        uncut = time.perf_counter() - started  # the prefill and four decoding steps
        box: dict = {}

        def run() -> None:
            box["out"] = engine.generate([Request(step, prompt)], engine.default_sampling)
            box["ended"] = time.perf_counter()

        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(uncut / 4)  # inside the prefill
        cancelled = time.perf_counter()
        engine.cancel()
        thread.join(timeout=120)
        assert box["out"] == [None]  # cut: dropped, never an answer
        assert box["ended"] - cancelled < max(0.5 * uncut, 0.5), (box["ended"] - cancelled, uncut)
        assert _hooks(engine.model) == 0
        again = engine.generate([Request(step, prompt)], engine.default_sampling)
        assert again[0] is not None and again[0].completion_tokens == 4  # the next generate runs as before
    finally:
        engine.close()


def test_an_adopted_model_goes_back_without_hooks(tiny_model_dir):
    """A model lent by a training run: a cancel that comes between two generates arms nothing, one during a
    generate arms hooks that are gone when the model is handed back, and the owner's forward runs."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lab.data import load_replay
    from lab.engines.base import Request
    from lab.engines.registry import create_engine

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&max_tokens=64")
    engine.adopt(model, AutoTokenizer.from_pretrained(tiny_model_dir))
    engine.cancel()  # no generate under way: nothing is armed
    assert _hooks(model) == 0
    step = load_replay(EXCERPT).steps[0]
    timer = threading.Timer(0.05, engine.cancel)
    timer.start()
    engine.generate([Request(step, step.prompt[:2000])] * 4, engine.default_sampling)
    timer.join()
    assert _hooks(model) == 0
    with torch.no_grad():
        assert model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape[-1] == model.config.vocab_size
