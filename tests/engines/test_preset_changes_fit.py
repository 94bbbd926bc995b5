"""A preset says what it changed and whether it fits (issue 41): `vllm:CKPT?preset=gemma4-e4b-sft` on a
Gemma 3 checkpoint ran with the preset's flags and prompt rules, and nothing but the server log showed them.

What the preset sets against the same SPEC without it (server flags, engine settings, prompt options,
contract, sampling, adapter), and one line when the checkpoint's config.json names another family than the
preset's (assets/models.yaml `families`): in the pool's status (the Engines tab reads it) and on the CLI.
Real tiny checkpoints of three families saved with transformers: Gemma 3 (`Gemma3ForCausalLM`), Gemma-4 and
Qwen3.5 (tests/engines/helpers_presets.py); the CLI is a real `python -m lab replay`."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lab.engines import create_engine, load_presets
from lab.engines.pool import EnginePool
from lab.engines.preset_changes import preset_changes
from lab.engines.preset_fit import fit_warning, read_checkpoint
from lab.errors import EngineSpecError
from tests.engines.helpers_presets import save_gemma3, save_gemma4, save_qwen35
from tests.paths import EXCERPT, REPO

PRESETS = load_presets()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("families")
    return {"gemma3": save_gemma3(root / "gemma3"), "gemma4": save_gemma4(root / "gemma4"),
            "qwen35": save_qwen35(root / "qwen35")}


def changes_of(spec: str) -> dict[tuple[str, str], tuple[str, str]]:
    return {(c.part, c.name): (c.with_preset, c.without) for c in preset_changes(create_engine(spec, presets=PRESETS))}


def test_a_preset_on_a_checkpoint_of_another_family_is_one_line(checkpoints):
    gemma3, gemma4, qwen35 = checkpoints["gemma3"], checkpoints["gemma4"], checkpoints["qwen35"]
    assert read_checkpoint(str(gemma3)).text() == "Gemma3ForCausalLM (gemma3_text)"
    warning = fit_warning(create_engine(f"vllm:{gemma3}?preset=gemma4-e4b-sft", presets=PRESETS))
    assert warning == (f"preset gemma4-e4b-sft is made for Gemma-4 checkpoints, but {gemma3} is Gemma3ForCausalLM "
                       "(gemma3_text): its prompt rules, contract and server flags may not fit this model")
    crossed = fit_warning(create_engine(f"transformers:{qwen35}?preset=gemma4-e4b-sft", presets=PRESETS))
    assert "Qwen3_5ForConditionalGeneration (qwen3_5, qwen3_5_text)" in crossed and "\n" not in crossed
    assert "made for Qwen3.5" in fit_warning(create_engine(f"vllm:{gemma4}?preset=qwen35-2b-sft", presets=PRESETS))
    # each family's own checkpoint fits its preset; a SPEC without a preset, or a bare preset, is not checked
    for spec in (f"vllm:{gemma4}?preset=gemma4-e4b-sft", f"transformers:{qwen35}?preset=qwen35-08b-grpo",
                 f"transformers-serve:{qwen35}?preset=qwen35-9b-cli-gym", f"vllm:{gemma3}", "gemma4-e4b-sft"):
        assert fit_warning(create_engine(spec, presets=PRESETS)) is None, spec


def test_what_the_preset_sets_against_no_preset(checkpoints):
    gemma3, qwen35 = checkpoints["gemma3"], checkpoints["qwen35"]
    assert changes_of(f"vllm:{gemma3}?preset=gemma4-e4b-sft") == {
        ("server flag", "--language-model-only"): ("true", "false"),
        ("prompt option", "strip_thinking_history"): ("on", "auto"),
        ("prompt option", "thinking_mode"): ("off", "auto"),
    }
    grpo = changes_of(f"vllm:{qwen35}?preset=qwen35-08b-grpo&max_tokens=64")  # the SPEC's max_tokens is its own
    assert grpo == {
        ("server flag", "--language-model-only"): ("true", "false"),
        ("contract", ""): ("bash-block", "tb2lite-json"),
        ("sampling", "temperature"): ("0.7", "0.0"),
        ("sampling", "top_p"): ("0.95", "1.0"),
        ("adapter", "LoRA"): (PRESETS["qwen35-08b-grpo"].lora, "not set"),
    }
    inproc = changes_of(f"transformers:{qwen35}?preset=qwen35-2b-sft&device=cpu")
    assert inproc == {("engine setting", "dtype (with dtype=auto)"): ("bfloat16", "not set")}
    assert changes_of(f"transformers-serve:{qwen35}?preset=lfm25-8b-a1b-sft") == {}  # nothing it uses
    assert changes_of(f"vllm:{qwen35}") == {}
    texts = [c.text() for c in preset_changes(create_engine(f"vllm:{gemma3}?preset=gemma4-e4b-sft", presets=PRESETS))]
    assert texts[0] == "server flag --language-model-only: true (without the preset: false)"


def test_the_pool_status_carries_it_before_the_engine_loads(checkpoints, tmp_path, monkeypatch):
    """A vLLM engine whose server cannot start: its row still names the checkpoint's architecture (the model
    cell was empty), the preset's changes and the warning."""
    monkeypatch.setenv("LAB_VLLM", str(tmp_path / "no-vllm" / "vllm"))
    monkeypatch.setenv("LAB_LOG_DIR", str(tmp_path / "logs"))
    pool = EnginePool(presets=PRESETS)
    try:
        name = pool.add(f"vllm:{checkpoints['gemma3']}?preset=gemma4-e4b-sft&name=g3")
        pool.wait([name], timeout=60)
        [row] = pool.status()
        assert row["state"] == "failed" and row["checkpoint"] == "Gemma3ForCausalLM (gemma3_text)"
        assert "made for Gemma-4" in row["preset_warning"]
        assert [c.name for c in row["preset_changes"]] == ["--language-model-only", "strip_thinking_history",
                                                           "thinking_mode"]
    finally:
        pool.close_all()


def test_the_cli_warns_in_one_line(checkpoints, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LAB_VLLM": str(tmp_path / "no-vllm" / "vllm"),
           "LAB_LOG_DIR": str(tmp_path / "logs"), "LAB_CACHE_DIR": str(tmp_path / "cache")}
    base = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--limit", "1", "--out", str(tmp_path)]
    done = subprocess.run([*base, "--engine", f"vllm:{checkpoints['gemma3']}?preset=gemma4-e4b-sft"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "preset gemma4-e4b-sft is made for Gemma-4 checkpoints" in warnings[0]
    assert "Gemma3ForCausalLM (gemma3_text)" in warnings[0] and "Traceback" not in done.stderr
    fits = subprocess.run([*base, "--engine", f"vllm:{checkpoints['gemma4']}?preset=gemma4-e4b-sft"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert "made for" not in fits.stderr and "vLLM is not installed" in fits.stderr  # no GPU, no vLLM: its own line


def test_a_preset_naming_an_unknown_family_is_refused(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("families:\n  Gemma-4:\n    model_types: [gemma4]\npresets:\n  p:\n    hf_id: org/m\n"
                    "    family: Gemma-5\n")
    with pytest.raises(EngineSpecError) as err:
        load_presets(path)
    assert str(path) in str(err.value) and "family 'Gemma-5' is not in 'families'" in str(err.value)
    path.write_text("families:\n  Gemma-4:\n    model_types: gemma4\npresets: {}\n")
    with pytest.raises(EngineSpecError, match="must be a list of names"):
        load_presets(path)


def test_a_hostile_config_json_is_text_or_nothing(tmp_path):
    """A checkpoint folder's config.json is data: markup in it is shown escaped, a huge or deeply nested one
    is not read (no verdict, no warning), and nothing from it reaches the page unescaped."""
    from lab.engines.pool import EnginePool
    from lab.ui.engines.tab import render_engine_table
    from lab.workspace import entry_from_status

    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "config.json").write_text('{"model_type": "<img src=x onerror=alert(1)>", '
                                      '"architectures": ["<script>alert(2)</script>", 7, null]}')
    engine = create_engine(f"transformers:{evil}?preset=gemma4-e4b-sft&device=cpu", presets=PRESETS)
    warning = fit_warning(engine)
    assert "<script>alert(2)</script> (<img src=x onerror=alert(1)>)" in warning
    pool = EnginePool(presets=PRESETS)
    try:
        pool.add(f"transformers:{evil}?preset=gemma4-e4b-sft&device=cpu&name=evil")
        pool.wait(timeout=60)
        html = render_engine_table([entry_from_status(row) for row in pool.status()])
    finally:
        pool.close_all()
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    for body in ("[" * 100_000 + "]" * 100_000, '{"model_type": "' + "x" * (5 * 2**20) + '"}', "[]", "not json"):
        (evil / "config.json").write_text(body)
        assert read_checkpoint(str(evil)).known is False
        assert fit_warning(create_engine(f"vllm:{evil}?preset=gemma4-e4b-sft", presets=PRESETS)) is None
