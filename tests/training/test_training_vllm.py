"""engine="vllm": a LoRA training run's checkpoints replayed on a real `vllm serve` (vLLM 0.32.0's CPU backend).

The server starts once, at the first save, with that checkpoint's adapter; the second save's adapter is
loaded into the running server (and the first unloaded) without a restart; the server stops when training
ends. The answers are those of the saved adapter replayed in process (`python -m lab replay` with
`transformers:BASE?lora=CHECKPOINT`).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from lab.resultfiles.files import read_result_file
from tests.engines.test_vllm_cpu import CONTEXT, vllm_env, vllm_processes  # noqa: F401 - vllm_env is a fixture
from tests.paths import EXCERPT, REPO
from tests.training.helpers_training import MAX_STEPS, SAVE_STEPS, reference_dataset

pytestmark = pytest.mark.skipif(not EXCERPT.exists(), reason=f"replay excerpt missing at {EXCERPT}")
SAVES = list(range(SAVE_STEPS, MAX_STEPS + 1, SAVE_STEPS))


def lora_model(model_dir: Path):
    """(the tokenizer, a fresh peft LoRA model on the tiny vLLM-sized model), seeded."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lab.engines.loading import MODEL_BUILD_LOCK

    with MODEL_BUILD_LOCK:
        torch.manual_seed(0)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                               LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    return AutoTokenizer.from_pretrained(model_dir), model


def test_lora_checkpoints_share_one_vllm_server(vllm_env, vllm_model_dir, tmp_path):  # noqa: F811
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

    from lab.training import TB2LiteCallback

    tokenizer, model = lora_model(vllm_model_dir)
    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-000"], limit=2, max_tokens=8,
                               engine="vllm", engine_options={"dtype": "float32", "max_model_len": CONTEXT,
                                                              "enforce_eager": "true", "kv_cache_gb": 0.5})
    served: dict[int, list[str]] = {}

    class ServedModels(TrainerCallback):
        """After each save's evaluation: the model names the running server answers to, and its process."""

        def on_save(self, args, state, control, **kwargs):
            server = callback.server.engine.server
            models = httpx.get(f"{server.base_url}/v1/models", timeout=30).json()["data"]
            served[state.global_step] = [m["id"] for m in models] + [f"pid {server.pid}"]

    args = TrainingArguments(output_dir=str(tmp_path / "lora-out"), max_steps=MAX_STEPS, save_steps=SAVE_STEPS,
                             logging_steps=1, per_device_train_batch_size=2, learning_rate=5e-2, seed=0, use_cpu=True,
                             report_to="none", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                      callbacks=[callback, ServedModels()])
    trainer.train()
    assert not vllm_processes(str(vllm_model_dir)), "the server outlived the training"
    assert callback.server.starts == 1 and all(o.error is None for o in callback.outcomes.values()), callback.outcomes
    first, second = served[SAVES[0]], served[SAVES[1]]
    assert "checkpoint-2" in first and "checkpoint-2" not in second and "checkpoint-4" in second
    assert first[-1] == second[-1]  # the same server process: no restart between saves
    assert {h["step"] for h in trainer.state.log_history if "tb2lite/score" in h} == set(SAVES)
    for step in SAVES:
        result = read_result_file(tmp_path / "runs" / f"lora-out-checkpoint-{step}.json")
        folder = tmp_path / "lora-out" / f"checkpoint-{step}"
        assert result["engine_spec"].startswith(f"vllm:{vllm_model_dir}?") and f"lora={folder}" in result["engine_spec"]
        assert result["lora_path"] == str(folder) and result["training"]["global_step"] == step
        assert all(r["error"] is None and r["completion_tokens"] == 8 for r in result["per_step"])
    # the adapter in effect is the saved one: in-process transformers with it gives the same greedy answers
    last = read_result_file(tmp_path / "runs" / f"lora-out-checkpoint-{SAVES[-1]}.json")
    spec = f"transformers:{vllm_model_dir}?lora={tmp_path / 'lora-out' / f'checkpoint-{SAVES[-1]}'}&device=cpu&" \
           "dtype=float32&max_tokens=8&name=inproc"
    done = subprocess.run([sys.executable, "-m", "lab", "replay", "--replay", str(EXCERPT), "--tasks", "task-000",
                           "--limit", "2", "--engine", spec, "--out", str(tmp_path / "inproc")], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    inproc = read_result_file(tmp_path / "inproc" / "inproc.json")
    assert [r["raw_output"] for r in last["per_step"]] == [r["raw_output"] for r in inproc["per_step"]]


def test_lora_checkpoints_share_one_vllm_server_beside_training(vllm_env, vllm_model_dir, tmp_path):  # noqa: F811
    """background=True: the worker process starts `vllm serve` once, at the first save, and loads the second save's
    adapter into the same server; training never waits for it; the server stops when the worker ends."""
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from lab.training import TB2LiteCallback

    tokenizer, model = lora_model(vllm_model_dir)
    callback = TB2LiteCallback(str(EXCERPT), tmp_path / "runs", tasks=["task-000"], limit=2, max_tokens=8,
                               engine="vllm", background=True,
                               engine_options={"dtype": "float32", "max_model_len": CONTEXT, "enforce_eager": "true",
                                               "kv_cache_gb": 0.5})
    args = TrainingArguments(output_dir=str(tmp_path / "lora-bg"), max_steps=MAX_STEPS, save_steps=SAVE_STEPS,
                             logging_steps=1, per_device_train_batch_size=2, learning_rate=5e-2, seed=0, use_cpu=True,
                             report_to="none", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False), callbacks=[callback])
    trainer.train()
    assert callback.state.worker.proc.wait(timeout=120) == 0  # all done: the worker ends, its server with it
    assert not vllm_processes(str(vllm_model_dir)), "the server outlived the worker"
    jobs = {j.step: j for j in callback.book.jobs()}
    assert [jobs[s].status for s in SAVES] == ["done", "done"], [(j.status, j.reason) for j in jobs.values()]
    first, second = jobs[SAVES[0]].server, jobs[SAVES[1]].server
    assert first["pid"] == second["pid"] and second["starts"] == 1  # one server: the second adapter loaded into it
    assert second["load_s"] < first["load_s"]  # an adapter swap, not a server start
    assert {h["step"] for h in trainer.state.log_history if "tb2lite/score" in h} == set(SAVES)
    for step in SAVES:
        result = read_result_file(tmp_path / "runs" / f"lora-bg-checkpoint-{step}.json")
        assert result["lora_path"] == str(tmp_path / "lora-bg" / f"checkpoint-{step}")
        assert all(r["error"] is None and r["completion_tokens"] == 8 for r in result["per_step"])
