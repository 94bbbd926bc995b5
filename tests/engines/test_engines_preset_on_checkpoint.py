"""`?preset=KEY` on a model SPEC: a preset's settings on a checkpoint the SPEC names (issue 24).

What the preset brings (engine flags, prompt options, contract, sampling, its LoRA unless given),
what the SPEC overrides, sweeps over checkpoint series, the result file and the Engines tab naming
the preset, the Gemma-4 prompt rules on a local Gemma-4 checkpoint folder, and a public
deployment's visitor: the same confinement as without a preset, no preset's trust_remote_code on a
visitor's checkpoint. Real parts: the lab's registry, pool, renderer, `python -m lab replay`, a
tiny random-weight model built in the test.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from lab.engines import create_engine, load_presets, resolve_spec
from lab.engines.admission import Admission
from lab.errors import EngineSpecError
from tests.paths import EXCERPT, REPO

ROOT = REPO
PRESETS = load_presets()


def test_vllm_preset_settings_on_a_checkpoint_folder(tmp_path):
    ckpt = tmp_path / "checkpoint-300"
    ckpt.mkdir()
    engine = create_engine(f"vllm:{ckpt}?preset=qwen35-2b-sft", presets=PRESETS)
    preset = PRESETS["qwen35-2b-sft"]
    assert engine.model_id == str(ckpt) and engine.name == "checkpoint-300" and engine.preset_key == "qwen35-2b-sft"
    assert engine.served_name == "checkpoint-300"  # not the preset's key: two checkpoints are two models
    assert engine.settings == preset.engine and engine.settings["language_model_only"] is True
    assert engine.contract == preset.contract and engine.prompt_options == preset.prompt_options
    assert engine.default_sampling == preset.sampling
    from lab.engines.servers.vllm_server import vllm_serve_argv

    argv = vllm_serve_argv("vllm", engine.model_id, 8000, engine.settings, served_name=engine.served_name)
    assert "--language-model-only" in argv and argv[argv.index("--dtype") + 1] == "bfloat16"


def test_spec_options_override_the_presets_and_a_given_lora_wins(tmp_path):
    base, adapter = tmp_path / "base", tmp_path / "adapters" / "checkpoint-100"
    base.mkdir()
    adapter.mkdir(parents=True)
    spec = f"vllm:{base}?preset=qwen35-08b-grpo&max_tokens=64&contract=tb2lite-json&language_model_only=false&thinking_mode=on"
    engine = create_engine(spec, presets=PRESETS)
    grpo = PRESETS["qwen35-08b-grpo"]
    assert engine.default_sampling.max_tokens == 64
    assert (engine.default_sampling.temperature, engine.default_sampling.top_p) == (grpo.sampling.temperature, grpo.sampling.top_p)
    assert engine.contract == "tb2lite-json" and engine.settings["language_model_only"] is False
    assert engine.prompt_options["thinking_mode"] == "on"
    assert engine.lora == grpo.lora  # the preset's adapter on this base, as the preset does on its hf_id
    assert engine.name == "base"
    given = create_engine(f"vllm:{base}?preset=qwen35-08b-grpo&lora={adapter}", presets=PRESETS)
    assert given.lora == str(adapter) and given.name == "checkpoint-100" and given.contract == "bash-block"


def test_transformers_kinds_take_the_preset_too(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    local = create_engine(f"transformers:{ckpt}?preset=gemma4-e4b-sft&device=cpu", presets=PRESETS)
    assert local.model_id == str(ckpt) and local.preset_key == "gemma4-e4b-sft"
    assert local.prompt_options == PRESETS["gemma4-e4b-sft"].prompt_options and local.preset_dtype == "bfloat16"
    served = create_engine(f"transformers-serve:Org/Model-2B?preset=lfm25-8b-a1b-sft&temperature=0.5", presets=PRESETS)
    assert served.model_id == "Org/Model-2B" and served.name == "Model-2B" and served.default_sampling.temperature == 0.5
    # the GRPO preset carries a LoRA adapter, which `transformers serve` cannot apply: one line says so
    with pytest.raises(EngineSpecError, match="transformers serve has no LoRA option"):
        create_engine(f"transformers-serve:{ckpt}?preset=qwen35-08b-grpo", presets=PRESETS)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("vllm:/ckpts/c?preset=no-such", "unknown preset 'no-such'; presets: gemma4-e4b-sft, lfm25"),
        ("stored:/x.json?preset=qwen35-2b-sft", "applies to vllm:, transformers: and transformers-serve:"),
        ("openai:http://h:1/v1#m?preset=qwen35-2b-sft", "applies to vllm:, transformers: and transformers-serve:"),
        ("qwen35-2b-sft?preset=gemma4-e4b-sft", "a bare preset name is already a preset"),
        ("reference?preset=gemma4-e4b-sft", "a bare preset name is already a preset"),
        ("vllm:qwen35-2b-sft?preset=gemma4-e4b-sft", "'qwen35-2b-sft' is a preset itself"),
        ("vllm:?preset=gemma4-e4b-sft", "give the checkpoint the preset applies to"),
    ],
)
def test_bad_preset_specs_get_one_line(spec, message):
    with pytest.raises(EngineSpecError) as err:
        create_engine(spec, presets=PRESETS)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_sweep_pattern_expands_to_one_engine_per_checkpoint_with_the_preset(tmp_path):
    from lab.sweep.specs import expand_specs

    for step in (100, 200, 300):
        (tmp_path / f"checkpoint-{step}").mkdir()
    specs = expand_specs([f"vllm:{tmp_path}/checkpoint-{{100..300..100}}?preset=qwen35-2b-sft&max_tokens=32"])
    engines = [create_engine(s, presets=PRESETS) for s in specs]
    assert [e.name for e in engines] == ["checkpoint-100", "checkpoint-200", "checkpoint-300"]
    assert all(e.preset_key == "qwen35-2b-sft" and e.settings["language_model_only"] for e in engines)
    assert all(e.default_sampling.max_tokens == 32 for e in engines)
    globbed = expand_specs([f"transformers:{tmp_path}/checkpoint-*?preset=lfm25-8b-a1b-sft"])
    assert [create_engine(s, presets=PRESETS).preset_key for s in globbed] == ["lfm25-8b-a1b-sft"] * 3


def test_a_local_gemma4_checkpoint_gets_the_gemma4_prompt_rules(tmp_path):
    """The Gemma-4 rules (patched turn, thinking stripped) key on the model's identity (SPEC §3); a
    checkpoint folder named checkpoint-100 has none, so the preset's Hub id joins the identity."""
    from lab.data.replay import load_replay
    from lab.prompts.engine_prompt import render_for_engine

    step = load_replay(EXCERPT).steps[0]
    ckpt = tmp_path / "checkpoint-100"
    ckpt.mkdir()
    with_preset = render_for_engine(create_engine(f"transformers:{ckpt}?preset=gemma4-e4b-sft", presets=PRESETS), step)
    plain = render_for_engine(create_engine(f"transformers:{ckpt}?thinking_mode=off&strip_thinking_history=on"), step)
    assert with_preset.status == "gemma4_patched" and with_preset.text.startswith("<bos><|turn>")
    assert plain.status == "raw_fallback"


def test_visitors_get_the_same_confinement_with_a_preset(tmp_path):
    data = tmp_path / "results"
    (data / "ckpts" / "checkpoint-100").mkdir(parents=True)
    admission = Admission(public=True, allow_models=True, data_roots=[data.resolve()])
    admission.check(resolve_spec(f"vllm:{data}/ckpts/checkpoint-100?preset=qwen35-2b-sft", PRESETS), visitor=True)
    admission.check(resolve_spec("vllm:Org/Model?preset=qwen35-2b-sft&temperature=0.3", PRESETS), visitor=True)
    for outside in ("/etc", "/no/such/folder", f"{data}/../../etc"):
        answers = []
        for spec in (f"vllm:{outside}", f"vllm:{outside}?preset=qwen35-2b-sft", f"transformers:{outside}?preset=gemma4-e4b-sft"):
            with pytest.raises(EngineSpecError) as err:
                admission.check(resolve_spec(spec, PRESETS), visitor=True)
            answers.append(str(err.value))
        assert len(set(answers)) == 1 and "outside the data folders" in answers[0]
    # the preset does not open options a visitor may not set
    with pytest.raises(EngineSpecError, match="not open to visitors"):
        admission.check(resolve_spec("vllm:Org/Model?preset=qwen35-2b-sft&max_num_seqs=512", PRESETS), visitor=True)
    with pytest.raises(EngineSpecError, match="outside the data folders"):
        admission.check(resolve_spec("vllm:Org/Model?preset=qwen35-2b-sft&lora=/etc", PRESETS), visitor=True)


def test_a_trust_remote_code_preset_never_reaches_a_visitors_checkpoint(tmp_path):
    trusting = {key: dataclasses.replace(p, trust_remote_code=True) for key, p in PRESETS.items()}
    data = tmp_path / "results"
    (data / "mine").mkdir(parents=True)
    admission = Admission(public=True, allow_models=True, data_roots=[data.resolve()])
    for spec in (f"vllm:{data}/mine?preset=qwen35-2b-sft", "transformers:Org/Evil?preset=lfm25-8b-a1b-sft"):
        with pytest.raises(EngineSpecError, match="runs its model's own code") as err:
            admission.check(resolve_spec(spec, trusting), visitor=True)
        assert "\n" not in str(err.value)
    admission.check(resolve_spec("qwen35-2b-sft", trusting), visitor=True)  # its own model: as before
    owner = create_engine(f"transformers:{data}/mine?preset=qwen35-2b-sft", presets=trusting)
    assert owner.trust_remote_code is True  # the owner's own checkpoint of that model: the owner's choice


def test_engines_tab_and_pool_status_name_the_preset(tiny_model_dir):
    from lab.engines.pool import EnginePool
    from lab.workspace import entry_from_status
    from lab.ui.engines.tab import render_engine_table

    pool = EnginePool(presets=PRESETS)
    try:
        name = pool.add(f"transformers:{tiny_model_dir}?preset=qwen35-9b-cli-gym&device=cpu&name=gym")
        plain = pool.add(f"transformers:{tiny_model_dir}?device=cpu&name=plain")
        rows = {row["name"]: row for row in pool.status()}
        assert rows[name]["preset"] == "qwen35-9b-cli-gym" and rows[plain]["preset"] is None
        html = render_engine_table([entry_from_status(row) for row in rows.values()])
        assert 'data-preset="qwen35-9b-cli-gym"' in html and html.count("data-preset=") == 1
    finally:
        pool.close_all()


@pytest.mark.slow
def test_cli_replay_with_a_preset_on_a_checkpoint_records_it(tiny_model_dir, tiny_lora_dir, tmp_path):
    """`python -m lab replay --engine transformers:CKPT?preset=qwen35-08b-grpo&lora=ADAPTER`: the preset's
    contract and sampling on the checkpoint, the given adapter, and the result file names the preset."""
    out = tmp_path / "runs"
    spec = f"transformers:{tiny_model_dir}?preset=qwen35-08b-grpo&lora={tiny_lora_dir}&device=cpu&max_tokens=6&seed=3"
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--limit", "2", "--out", str(out),
           "--engine", spec]
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(out.glob("*.json")).read_text())
    grpo = PRESETS["qwen35-08b-grpo"]
    assert result["sampling"]["preset"] == "qwen35-08b-grpo" and result["contract"] == "bash-block"
    assert (result["sampling"]["temperature"], result["sampling"]["top_p"]) == (grpo.sampling.temperature, grpo.sampling.top_p)
    assert result["sampling"]["max_tokens"] == 6 and result["lora_path"] == str(tiny_lora_dir)
    assert result["model_path"] == str(tiny_model_dir) and result["engine_spec"] == spec
    assert len(result["per_step"]) == 2
    # an unknown preset is one line on the CLI, no traceback
    bad = subprocess.run([*cmd[:-1], f"transformers:{tiny_model_dir}?preset=nope"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode != 0 and "unknown preset 'nope'" in bad.stderr and "Traceback" not in bad.stderr
