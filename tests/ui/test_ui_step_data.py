"""A step switch in Compare builds the step's data once: the reference is parsed once, not once per view."""
from __future__ import annotations

import sys
from collections import Counter

import pytest

import lab.runs.pipeline as pipeline
from lab.settings import Settings
from tests.paths import EXCERPT
from tests.ui.test_ui_handlers import write_stored_run

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    """A lab context (excerpt replay, reference + one stored run) without a store or a server."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("step-data")
    runs = root / "results" / "runs"
    write_stored_run(runs / "altered.json", "altered")
    settings = Settings(results_dir=root / "results", runs_dir=runs, db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, ["reference", f"stored:{runs / 'altered.json'}"], open_db=False)
    ctx.pool.wait()
    return ctx


def test_a_step_switch_parses_the_reference_once(ctx, monkeypatch):
    from lab.ui.compare.handlers import step_outputs

    step = ctx.replay.steps[3]
    assert (("reference", step.key)) not in ctx.views  # a step no column has answered yet
    pipeline._REF_CACHE.pop(step.ref_raw, None)
    ui_calls: Counter = Counter()
    real_parses: Counter = Counter()
    ui_parse, real_parse = pipeline.parse_reference, pipeline.parse_action

    def counted_ui_parse(s):
        ui_calls[s.key] += 1
        return ui_parse(s)

    def counted_real_parse(text):
        real_parses[text] += 1
        return real_parse(text)

    ui_modules = [m for name, m in list(sys.modules.items())
                  if name.startswith("lab.ui.") and getattr(m, "parse_reference", None) is ui_parse]
    assert ui_modules  # the UI parses references through the pipeline's parse_reference
    for module in ui_modules:  # every UI module that can parse a reference is counted
        monkeypatch.setattr(module, "parse_reference", counted_ui_parse)
    monkeypatch.setattr(pipeline, "parse_action", counted_real_parse)
    out = step_outputs(ctx, step.key)
    assert out.step_key == step.key and out.heat_figure is not None  # columns, context and heatmap all drawn
    assert 'data-engine="reference"' in out.columns_html and 'data-engine="stored:' in out.columns_html
    assert ui_calls[step.key] == 1  # the step's data parses it once for the context, F1 gap and heatmap
    assert real_parses[step.ref_raw] == 1  # and the engines' scoring reuses that parse


def test_step_data_is_what_the_views_show(ctx):
    from lab.ui.compare.handlers import outputs_of, step_outputs
    from lab.ui.compare.step_data import step_data

    key = ctx.replay.steps[1].key
    data = step_data(ctx, key)
    assert data.step.key == key and [v.name for v in data.views] == [e.name for e in data.entries]
    assert list(data.view.ref_parsed.command_units) == list(data.ref.command_units)
    assert data.heat_engine == "altered"  # the heatmap prefers a non-reference engine
    assert outputs_of(ctx, data) == step_outputs(ctx, key)
    assert step_data(ctx, "no/such-step").step.key == ctx.step_keys()[0]  # an unknown key shows the first step
