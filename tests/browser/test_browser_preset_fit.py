"""Real browser (issue 41 item 3): a preset says what it changed against no preset, and warns in one line
when the checkpoint is not of the preset's family: in the Engines tab (the engine's row; its model cell
names the checkpoint's architecture even when its server could not start) and in a Compare column's
prompt audit. Real tiny checkpoints of three families (tests/engines/helpers_presets.py): the Gemma-4
preset on a Gemma 3 checkpoint as a `vllm:` engine whose server cannot start here (no vLLM: it fails at
once, as the report's engine stood before its server answered), on a Qwen3.5 checkpoint in process (it
loads and answers), and on its own family's Gemma-4 checkpoint (no warning)."""
from __future__ import annotations

import pytest

from lab.settings import Settings
from tests.browser.helpers_page import lab_page
from tests.browser.test_browser_compare import CHROMIUM, shot_dir
from tests.engines.helpers_presets import save_gemma3, save_gemma4, save_qwen35
from tests.helpers_servers import serve_lab
from tests.paths import EXCERPT

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed at /usr/bin/chromium"),
    pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}"),
]


def test_engines_tab_and_audit_show_the_presets_changes_and_fit(tmp_path, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    from lab.serve import create_context

    monkeypatch.setenv("LAB_VLLM", str(tmp_path / "no-vllm" / "vllm"))  # this machine's vLLM is not asked for
    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gemma3, gemma4, qwen35 = save_gemma3(tmp_path / "gemma3"), save_gemma4(tmp_path / "gemma4"), save_qwen35(tmp_path / "q")
    settings = Settings(results_dir=tmp_path / "results", runs_dir=tmp_path / "results" / "runs",
                        db_path=tmp_path / "lab.duckdb", cache_dir=tmp_path / "cache", replay_path=str(EXCERPT))
    ctx = create_context(settings, [f"vllm:{gemma3}?preset=gemma4-e4b-sft&name=g3",
                                    f"transformers:{qwen35}?preset=gemma4-e4b-sft&device=cpu&max_tokens=4&name=qg",
                                    f"transformers:{gemma4}?preset=gemma4-e4b-sft&device=cpu&max_tokens=4&name=g4"])
    try:
        assert ctx.pool.wait(timeout=300)
        with serve_lab(ctx) as (_, url), sync_playwright() as p:
            browser, page = lab_page(p, url, 1600, 1200, 30_000)
            page.get_by_role("tab", name="Engines").click()
            table = page.locator("#lab-engine-table")
            g3, qg, g4 = (table.locator(f'tr[data-engine="{name}"]') for name in ("g3", "qg", "g4"))
            expect(g3.locator("[data-state]")).to_have_text("failed")
            expect(g3.locator("td[data-model]")).to_contain_text("Gemma3ForCausalLM (gemma3_text)")  # was empty
            warning = g3.locator("[data-preset-warning]")
            expect(warning).to_have_count(1)
            expect(warning).to_contain_text(f"preset gemma4-e4b-sft is made for Gemma-4 checkpoints, but {gemma3} is "
                                            "Gemma3ForCausalLM (gemma3_text)")
            changes = g3.locator("details.lab-preset-changes")
            expect(changes.locator("summary")).to_have_text("preset gemma4-e4b-sft sets 3 things (vs no preset)")
            changes.locator("summary").click()
            rows = changes.locator("tr[data-change]")
            expect(rows).to_have_count(3)
            for i, cells in enumerate((["server flag", "--language-model-only", "true", "false"],
                                       ["prompt option", "strip_thinking_history", "on", "auto"],
                                       ["prompt option", "thinking_mode", "off", "auto"])):
                expect(rows.nth(i).locator("td")).to_have_text(cells)
            expect(qg.locator("[data-preset-warning]")).to_contain_text("Qwen3_5ForConditionalGeneration")
            expect(g4.locator("[data-preset-warning]")).to_have_count(0)  # its own family: no warning
            g4.locator("details.lab-preset-changes summary").click()
            expect(g4.locator("tr[data-change]")).to_have_count(3)  # the prompt options and the dtype, no server
            expect(g4).to_contain_text("dtype (with dtype=auto)")
            page.screenshot(path=str(shot_dir(tmp_path) / "engines-preset-fit.png"), full_page=True)

            page.get_by_role("tab", name="Compare").click()
            panel = page.locator('#lab-columns details.lab-audit[data-audit-engine="qg"]')
            panel.locator(":scope > summary").click()
            expect(panel.locator("[data-preset-warning]")).to_contain_text("made for Gemma-4 checkpoints")
            expect(panel.locator(":scope > summary")).to_contain_text("preset of another family")
            expect(panel.locator("details.lab-preset-changes summary")).to_contain_text("preset gemma4-e4b-sft sets")
            fits = page.locator('#lab-columns details.lab-audit[data-audit-engine="g4"]')
            fits.locator(":scope > summary").click()
            expect(fits.locator("details.lab-preset-changes")).to_have_count(1)
            expect(fits.locator("[data-preset-warning]")).to_have_count(0)
            browser.close()
    finally:
        ctx.pool.close_all()
