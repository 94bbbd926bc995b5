"""A real tiny training run for the callback's tests: the tiny model learns the excerpt's reference answers.

The model is the suite's tiny random-weight Qwen2 (tests/conftest.py) with attention dropout, so a
callback that moved torch's generator would change the training; the data are the reference replies
(`ref_raw`) of the excerpt's steps, tokenized to 96 tokens. Every run starts from the same seed, so two
runs differ only by their callbacks.
"""
from __future__ import annotations

from pathlib import Path

from tests.paths import EXCERPT

MAX_STEPS, SAVE_STEPS = 4, 2  # two saves: checkpoint-2 and checkpoint-4


def reference_dataset(tokenizer):
    """The excerpt's reference answers as a causal-LM dataset."""
    from datasets import Dataset

    from lab.data import load_replay

    texts = [s.ref_raw for s in load_replay(EXCERPT).steps]
    return Dataset.from_dict({"text": texts}).map(
        lambda b: tokenizer(b["text"], truncation=True, max_length=96), batched=True, remove_columns=["text"])


def tiny_training_model(model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM

    from lab.engines.loading import MODEL_BUILD_LOCK

    with MODEL_BUILD_LOCK:
        torch.manual_seed(0)
        return AutoModelForCausalLM.from_pretrained(model_dir, attention_dropout=0.1)


def train_tiny(model_dir: Path, out: Path, callbacks: list, *, processing_class: bool = True,
               report_to: list[str] | None = None, max_steps: int = MAX_STEPS, save_steps: int = SAVE_STEPS,
               **arguments):
    """Train the tiny model `max_steps` optimizer steps, saving every `save_steps` (more TrainingArguments in
    `arguments`); returns (trainer, model)."""
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = tiny_training_model(model_dir)
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=save_steps, logging_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True,
                             report_to=report_to or "none", disable_tqdm=True, dataloader_num_workers=0, **arguments)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer),
                      processing_class=tokenizer if processing_class else None,
                      # without processing_class the trainer must not find the tokenizer on the collator either
                      data_collator=collator if processing_class else lambda features: collator(features),
                      callbacks=callbacks)
    trainer.train()
    return trainer, model


def same_parameters(a, b) -> bool:
    import torch

    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def losses(trainer) -> list[float]:
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


def logged(trainer, key: str) -> dict[int, float]:
    """global step -> value of `key` in the trainer's log history."""
    return {h["step"]: h[key] for h in trainer.state.log_history if key in h}


def tensorboard_scalars(logdir: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value}, read back with TensorBoard's own event reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[int, float]] = {}
    for events in sorted(Path(logdir).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events.parent))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


GROUPS = ("software_engineering", "data_science", "system_administration")


def synthetic_replay(path: Path, tasks: int = 12, steps: int = 3) -> Path:
    """A replay of `tasks` tasks of `steps` steps each over three source groups, built from the excerpt's first
    record with its prompt cut to a line, so the tiny model answers a step in milliseconds."""
    import json

    first = json.loads(EXCERPT.read_text(encoding="utf-8").splitlines()[0])
    rows = []
    for t in range(tasks):
        group = GROUPS[t % len(GROUPS)]
        for s in range(steps):
            rows.append({**first, "task_id": f"task-{t:03d}", "step_idx": s, "total_steps": steps,
                         "is_final_step": s == steps - 1, "source_group": group, "source": f"synthetic/{group}",
                         "prompt": f"Task {t}: list the files in /app (step {s}).\n\nCurrent terminal state:\n$ "})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def clock():
    """A callback noting when each save and each step's end reach it: one placed just before TB2LiteCallback and one
    just after it time what the callback holds the training loop for."""
    import time

    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.saves: dict[int, float] = {}
            self.steps: dict[int, float] = {}

        def on_save(self, args, state, control, **kwargs):
            self.saves[state.global_step] = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.steps[state.global_step] = time.perf_counter()

    return Clock()
