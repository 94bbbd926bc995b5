"""Compare's prompt audit panels and per-answer timings, with the tiny real transformers model."""
from __future__ import annotations

import dataclasses
import html
import json
from pathlib import Path

import pytest

from lab.engines import create_engine
from lab.settings import Settings
from lab.ui.compare.audit_panel import audit_answer
from lab.ui.compare.answers import generate_views
from lab.ui.compare.handlers import step_outputs
from lab.ui.compare.render_html import render_column, render_f1_gap
from lab.ui.compare.step_view import f1_gap
from tests.paths import EXCERPT

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")

TINY = "tiny"


@pytest.fixture(scope="module")
def ctx(tiny_model_dir, tmp_path_factory):
    """A lab context (no server) with the excerpt, `reference` and the tiny model (8 new tokens)."""
    from lab.serve import create_context

    root = tmp_path_factory.mktemp("audit")
    settings = Settings(results_dir=root / "results", runs_dir=root / "results" / "runs", db_path=root / "lab.duckdb",
                        cache_dir=root / "cache", replay_path=str(EXCERPT), allow_engine_loading=True)
    context = create_context(settings, ["reference", f"transformers:{tiny_model_dir}?device=cpu&max_tokens=8&name={TINY}"],
                             open_db=False)
    context.pool.wait()
    assert [e.state for e in context.engine_entries()] == ["ready", "ready"], context.engine_entries()
    return context


def engine_of(ctx, name: str):
    return next(e for e in ctx.engine_entries() if e.name == name).engine


def shortest_step(ctx):
    return min(ctx.replay.steps, key=lambda s: len(s.prompt))


def ask(ctx, name: str, key: str) -> tuple[str, str]:
    """The audit panel's (summary, body) as the browser receives them."""
    engine, step, state, summary, body = json.loads(audit_answer(ctx, json.dumps([name, key])))
    assert (engine, step) == (name, key) and state in ("template", "verbatim", "error")
    return summary, body


def test_audit_panel_is_pending_until_opened_and_display_only_for_reference(ctx):
    step = ctx.replay.steps[1]
    columns = step_outputs(ctx, step.key).columns_html
    assert f'data-audit="pending" data-audit-engine="{TINY}" data-audit-step="{step.key}"' in columns
    assert 'data-audit="display_only" data-audit-engine="reference"' in columns
    assert "rendered for display only" in columns
    assert (TINY, step.key) not in ctx.audits  # nothing computed by a step switch


def test_audit_shows_template_status_own_template_tokens_and_fit(ctx):
    step = ctx.replay.steps[0]
    tokenizer = engine_of(ctx, TINY).tokenizer
    summary, body = ask(ctx, TINY, step.key)
    rendered = tokenizer.apply_chat_template([dict(m) for m in step.messages], tokenize=False,
                                             add_generation_prompt=True)
    n_tokens = len(tokenizer(rendered, add_special_tokens=False).input_ids)
    assert "chat_template" in summary and "= own template" in summary and "fits" in summary
    assert "identical</span> to the model's own chat template" in html.unescape(body)
    assert f"as the engine sends it: <b>{n_tokens:,} tokens</b> ({len(rendered):,} chars;" in body
    assert f"own template: <b>{n_tokens:,} tokens</b>" in body
    context = engine_of(ctx, TINY).max_model_len
    assert context == 32768  # the tiny model's max_position_embeddings, read from its config
    budget = context - 8
    assert f"max_model_len {context:,} − max_tokens 8 = <b>{budget:,}</b>" in body
    assert f"{budget - n_tokens:,} tokens to spare" in body
    # cached: the next render of this step shows the audit without asking
    assert (TINY, step.key) in ctx.audits
    assert 'data-audit="template"' in step_outputs(ctx, step.key).columns_html


def test_audit_shows_where_truncation_cuts_with_escaped_preview(ctx):
    engine = engine_of(ctx, TINY)
    tokenizer = engine.tokenizer
    marker = "<b>lost & found</b>"
    messages = ({"role": "user", "content": "list the files\n" + "\n".join([marker] * 8)},)
    step = dataclasses.replace(ctx.replay.steps[2], messages=messages)
    ctx.replay.by_key[step.key] = step
    context = engine.max_model_len
    engine.max_model_len = 8 + 12  # max_tokens 8: a 12-token budget
    try:
        ctx.audits.drop(lambda key: key[1] == step.key)
        summary, body = ask(ctx, TINY, step.key)
    finally:
        engine.max_model_len = context
        ctx.replay.by_key[step.key] = ctx.replay.steps[2]
        ctx.audits.drop(lambda key: key[1] == step.key)
    text = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)
    starts = [a for a, _ in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    budget, n = 12, len(starts)
    assert "refused: prompt too long" in summary and "does not fit" in body  # in-process never truncates
    assert "<b>refused</b> before generation" in body and "this engine never truncates" in body
    assert f"over by {n - budget:,} tokens" in body
    assert f"truncation would cut at token {budget:,} · char {starts[budget]:,} (right side)" in body
    assert f"{n - budget:,} tokens, {len(text) - starts[budget]:,} chars" in body
    lost = text[starts[budget]:].splitlines()
    assert html.escape("\n".join(lost[:5])) in body  # the first lines a cut would lose
    assert html.escape(marker) in body and marker not in body  # model/prompt text is escaped


def test_a_server_engine_rejects_an_over_long_prompt_instead_of_cutting_it(ctx, tiny_model_dir):
    from lab.ui.compare.audit_panel import compute_audit
    from lab.ui.compare.render_audit import audit_summary, render_audit_body
    from tests.helpers_servers import free_port

    # an openai engine whose server reports max_model_len 20 (given here: no server is needed to audit)
    engine = create_engine(f"openai:http://127.0.0.1:{free_port()}#{tiny_model_dir}"
                           "?check=false&max_tokens=8&max_model_len=20")
    engine.load()
    try:
        messages = ({"role": "user", "content": "list the files\n" + "\n".join(["lost and found"] * 8)},)
        step = dataclasses.replace(ctx.replay.steps[2], messages=messages)
        audit = compute_audit(engine, step)
    finally:
        engine.close()
    summary, body = audit_summary(audit), render_audit_body(audit)
    assert audit.fits is False and audit.rejects and audit.refused and audit.overlong == "reject"
    assert "refused: prompt too long" in summary and "cut " not in summary
    assert "<b>refused</b> before generation (the prompt is never truncated)" in body
    assert "this engine never truncates: this is what would have to go" in body


def test_contract_prompt_sent_verbatim_is_audited_without_template(ctx, tiny_model_dir):
    name = ctx.add_engine(f"transformers:{tiny_model_dir}?device=cpu&contract=bash-block&name=grpo", wait=True)
    try:
        summary, body = ask(ctx, name, ctx.replay.steps[0].key)
    finally:
        ctx.remove_engine(name)
    assert "contract_prompt" in summary and "sent verbatim" in summary
    assert "sent verbatim (no chat template)" in body and "own template: <b>" not in body


def test_audit_request_for_unknown_engine_or_bad_json_says_so(ctx):
    _, body = ask(ctx, "nope", ctx.replay.steps[0].key)
    assert "no longer available" in body
    assert audit_answer(ctx, "not json") == ""


def test_timing_strip_and_f1_summary_after_generate(ctx):
    step = shortest_step(ctx)
    *_, views = list(generate_views(ctx, step.key))
    tiny = next(v for v in views if v.name == TINY)
    assert tiny.state == "ready" and tiny.latency_s and tiny.completion_tokens
    column = render_column(tiny)
    assert 'data-timing="latency"' in column and 'data-timing="tokens"' in column
    assert f"<b>{tiny.completion_tokens / tiny.latency_s:,.1f}</b>" in column  # tok/s
    if tiny.ttft_s is not None:
        assert 'data-timing="TTFT"' in column
    summary = render_f1_gap(f1_gap(views))
    assert f'data-latency="{TINY}"' in summary and 'data-latency="reference"' in summary
    assert "latency" in summary and f"{tiny.f1:.4f}" in summary
    # the handler's columns (what Generate sends) carry the same strip
    assert 'data-timing="tok/s"' in step_outputs(ctx, step.key).columns_html


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian chromium is not installed")
def test_browser_fills_the_audit_panel_when_opened(ctx):
    """The panel is computed on first opening (hidden Gradio components + JS), in real Chromium."""
    from playwright.sync_api import expect, sync_playwright

    from tests.helpers_servers import serve_lab

    with serve_lab(ctx) as (_, url):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(20_000)
            ctx.audits.drop(lambda key: key[0] == TINY)  # the first step's audit was computed above
            page.goto(url)
            panel = page.locator(f'#lab-columns details.lab-audit[data-audit-engine="{TINY}"]')
            expect(panel).to_have_attribute("data-audit", "pending")
            panel.locator("summary").click()
            expect(panel).to_have_attribute("data-audit", "template")
            expect(panel).to_contain_text("identical")
            expect(panel.locator("summary")).to_contain_text("fits")
            browser.close()
