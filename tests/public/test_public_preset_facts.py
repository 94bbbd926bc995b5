"""What a preset changed and its fit warning, as a visitor of a public deployment sees them (issue 41): no
server flags (the server's command line is the owner's, as the flags cell) and no server paths."""
from __future__ import annotations

from lab.engines.preset_changes import PresetChange
from lab.settings import Settings
from lab.workspace import EngineEntry, LabContext


def test_a_visitor_sees_no_server_flags_and_no_server_paths(tmp_path):
    ctx = LabContext(settings=Settings(results_dir=tmp_path / "results", public=True, cache_dir=tmp_path / "cache",
                                       db_path=tmp_path / "lab.duckdb"))
    entry = EngineEntry(
        spec="vllm:/srv/ckpts/a?preset=gemma4-e4b-sft", name="a", kind="vllm", state="failed",
        preset_changes=[PresetChange("server flag", "--language-model-only", "true", "false"),
                        PresetChange("prompt option", "thinking_mode", "off", "auto"),
                        PresetChange("adapter", "LoRA", "/srv/adapters/grpo", "not set")],
        preset_warning="preset gemma4-e4b-sft is made for Gemma-4 checkpoints, but /srv/ckpts/a is Gemma3ForCausalLM")
    shown = ctx.shown_entry(entry)
    assert [c.part for c in shown.preset_changes] == ["prompt option", "adapter"]
    assert "/srv" not in repr(shown.preset_changes) and "/srv" not in shown.preset_warning
    assert shown.preset_warning.endswith("but …/a is Gemma3ForCausalLM")
