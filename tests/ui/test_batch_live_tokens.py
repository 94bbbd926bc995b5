"""Issue 56: Batch shows a running engine's tokens so far, tokens a second and the time left (an estimate,
bounded by max_tokens until a step finishes) while its batch generates, not only when steps finish."""
from __future__ import annotations

import re

import pytest

from tests.helpers_store import excerpt_lab
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")

LIVE = re.compile(r'data-field="live">([^<]*)<')


def test_batch_shows_tokens_and_time_left_while_the_batch_generates(tiny_model_dir, tmp_path, monkeypatch):
    import lab.ui.batch.tab as batch_tab
    from lab.ui.batch.tab import start_batch
    from lab.visitors import SessionEvents

    monkeypatch.setattr(batch_tab, "LIVE_EVERY_S", 0.05)  # every second in use; the tiny model is fast
    spec = f"transformers:{tiny_model_dir}?device=cpu&max_tokens=300&batch_size=2&name=tiny"
    with excerpt_lab(tmp_path, (spec,)) as ctx:
        # task-000's early steps: one batch of two
        pages = list(start_batch(ctx, SessionEvents(), ["tiny"], ["task-000"], ["early"], [], True, "tiny-live"))
        run = ctx.query("SELECT steps, path FROM runs").iloc[0]
    early = [p for p in pages if 'data-field="steps">0/2<' in p and LIVE.search(p) and "tok/s" in LIVE.search(p)[1]]
    assert early, pages[-1][-1500:]
    line = LIVE.search(early[-1])[1]
    assert re.fullmatch(r"[\d,]+ tokens · [\d.,]+ tok/s · at most about \d+ (s|min) left \(estimate: every step "
                        r"counted at its 300-token limit until one finishes\)", line), line
    final = pages[-1]
    assert 'data-field="steps">2/2<' in final and "saved tiny-live.json" in final and run.steps == 2
    assert re.fullmatch(r"[\d,]+ tokens · [\d.,]+ tok/s", LIVE.search(final)[1])  # done: what it took
