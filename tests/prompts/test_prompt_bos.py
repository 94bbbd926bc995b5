"""Issue 27 item 3: one token count everywhere (as the engine sends the prompt, with the special tokens
it adds), and a chat template that starts with BOS on a tokenizer that adds BOS again is flagged."""
from __future__ import annotations

import pytest

from lab.data import load_replay
from lab.engines.base import Sampling
from lab.engines.registry import create_engine
from lab.prompts.engine_prompt import render_for_engine
from lab.runs.pipeline import run_steps
from tests.prompts.helpers_bos import BOS, save_bos_model
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def bos_model(tmp_path_factory):
    return save_bos_model(tmp_path_factory.mktemp("bos-model"))


@pytest.mark.parametrize("add_special", [True, False])
def test_one_count_and_the_doubled_bos(bos_model, add_special):
    from lab.ui.compare.audit_panel import compute_audit
    from lab.ui.compare.render_audit import audit_summary, render_audit_body
    from lab.ui.compare.render_html import render_prompt_block
    from lab.ui.compare.step_view import engine_view_from_result

    flag = "" if add_special else "&add_special_tokens=false"
    engine = create_engine(f"transformers:{bos_model}?device=cpu&dtype=float32&max_tokens=3&name=bos{flag}")
    engine.load()
    try:
        step = load_replay(str(EXCERPT)).steps[0]
        rendered = render_for_engine(engine, step)
        bos = engine.tokenizer.convert_tokens_to_ids(BOS)
        sent = engine.tokenizer(rendered.text, add_special_tokens=add_special).input_ids
        assert rendered.text.startswith(BOS)
        assert (sent[:2] == [bos, bos]) is add_special  # what the model really receives

        # the prompt header, the audit and the engine's own count agree
        result = run_steps(engine, [step])[0]
        assert result.completion.prompt_tokens == len(sent) == rendered.n_tokens
        audit = compute_audit(engine, step)
        assert audit.n_tokens == len(sent) and audit.doubled_bos is add_special
        assert audit.special_added == (1 if add_special else 0)
        body, summary = render_audit_body(audit), audit_summary(audit)
        assert f"<b>{len(sent):,} tokens</b>" in body
        assert ('data-doubled-bos="1"' in body) is add_special and ("BOS twice" in summary) is add_special
        view = engine_view_from_result(engine.spec, engine.name, result, engine.kind)
        assert f"{len(sent):,} tokens as sent" in render_prompt_block(view)

        # a too-long prompt's refusal names the same count
        engine.max_model_len = len(sent)
        refusal = engine.refusal(rendered.text, Sampling(max_tokens=1))
        assert refusal is not None and f"{len(sent):,} prompt tokens" in refusal
    finally:
        engine.close()
