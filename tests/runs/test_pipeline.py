"""The render → generate → parse → score path on a real tiny model, and its CLI replay."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lab.data import load_replay
from lab.engines import create_engine
from lab.prompts.contracts import get_contract
from lab.prompts.engine_prompt import CONTRACT_PROMPT_STATUS, render_for_engine
from lab.runs.pipeline import run_steps
from lab.engines.base import Sampling
from tests.paths import EXCERPT, REPO


@pytest.fixture(scope="module")
def steps():
    return load_replay(EXCERPT).steps


@pytest.fixture(scope="module")
def tiny_engine(tiny_model_dir):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu")
    engine.load()
    yield engine
    engine.close()


def test_json_contract_renders_through_the_chat_template(tiny_engine, steps):
    prompt = render_for_engine(tiny_engine, steps[1])
    assert prompt.status == "chat_template" and prompt.error is None
    assert prompt.text.startswith("<|im_start|>user\n") and prompt.text.endswith("<|im_start|>assistant\n")
    # the earlier reference reply is in the history verbatim (teacher forcing)
    assert steps[0].ref_raw in prompt.text
    assert prompt.n_tokens == len(tiny_engine.tokenizer(prompt.text, add_special_tokens=False).input_ids)


def test_bash_block_contract_prompt_is_sent_verbatim(tiny_model_dir, steps):
    engine = create_engine(f"transformers:{tiny_model_dir}?device=cpu&contract=bash-block")
    engine.load()
    prompt = render_for_engine(engine, steps[0])
    _, card_prompt = get_contract("bash-block").build_messages(steps[0])
    assert prompt.text == card_prompt and prompt.status == CONTRACT_PROMPT_STATUS
    assert prompt.text.startswith("### System: You are a local OS Terminal Controller Agent.")
    assert prompt.text.rstrip().endswith("### Output:")
    assert "<|im_start|>" not in prompt.text
    engine.close()


def test_run_steps_scores_every_answer_and_keeps_the_raw_output(tiny_engine, steps):
    seen = []
    results = run_steps(tiny_engine, steps[:2], Sampling(max_tokens=6), on_result=lambda i, r: seen.append(i))
    assert sorted(seen) == [0, 1] and len(results) == 2
    for r in results:
        row = r.per_step
        assert row["raw_output"] == r.completion.text and row["pred_preview"] == r.completion.text[:1200]
        assert row["finish_reason"] in {"length", "stop"}
        assert 0 < len(row["token_ids_preview"]) <= 6
        assert row["template_status"] == "chat_template" and row["prompt_tokens"] > 0
        assert row["ref_command_units"] == r.ref_parsed.command_units and row["ref_command_units"]
        assert 0.0 <= row["command_f1"] <= 1.0


def test_cli_replay_with_transformers_engine_records_template_and_context(tmp_path, tiny_model_dir):
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine",
           f"transformers:{tiny_model_dir}?device=cpu", "--limit", "3", "--max-tokens", "4",
           "--max-model-len", "200000", "--out", str(out), "--name", "tiny"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "tiny.json").read_text())
    pt = result["prompt_template"]
    assert pt["template_status"] == "chat_template" and pt["rank_eligible"] is True
    assert pt["template_status_counts"] == {"chat_template": 3}
    stats = pt["context_stats"]
    assert stats["row_count"] == 3 and stats["max_model_len"] == 200000 and stats["max_tokens"] == 4
    assert stats["min"] <= stats["p50"] <= stats["max"]
    assert result["sampling"]["max_tokens"] == 4 and result["sampling"]["backend"] == "transformers"
    assert result["load_time_sec"] is not None and result["gen_time_sec"] >= 0
    assert result["aggregate"]["steps"] == 3


def test_cli_context_guard_aborts_with_the_offenders(tmp_path, tiny_model_dir):
    cmd = [sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--engine",
           f"transformers:{tiny_model_dir}?device=cpu", "--limit", "3", "--max-tokens", "4",
           "--max-model-len", "64", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "task-000/0" in proc.stderr and "64" in proc.stderr
    assert not list(tmp_path.glob("*.json")), "nothing is written when the guard aborts"
