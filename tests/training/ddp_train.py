"""One rank of a 2-process DDP training run (torch.distributed's gloo on CPU) with TB2LiteCallback.

    python -m torch.distributed.run --nproc_per_node 2 tests/training/ddp_train.py MODEL_DIR OUT RESULTS REPORT [background]

Each rank trains the tiny model (tests/training/helpers_training.py) and writes REPORT/rank-N.json: its
log history, its view of the parameters (a sum per tensor) and whether it is the main process.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from lab.training import TB2LiteCallback
    from tests.paths import EXCERPT
    from tests.training.helpers_training import MAX_STEPS, SAVE_STEPS, reference_dataset, tiny_training_model

    model_dir, out, results, report = (Path(a) for a in sys.argv[1:5])
    background = sys.argv[5:6] == ["background"]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = tiny_training_model(model_dir)
    args = TrainingArguments(output_dir=str(out), max_steps=MAX_STEPS, save_steps=SAVE_STEPS, logging_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True, report_to="none",
                             disable_tqdm=True, ddp_backend="gloo", ddp_timeout=600)
    callback = TB2LiteCallback(str(EXCERPT), results, tasks=["task-000"], limit=1, max_tokens=8, background=background)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False), callbacks=[callback])
    trainer.train()
    report.mkdir(parents=True, exist_ok=True)
    (report / f"rank-{args.process_index}.json").write_text(json.dumps({
        "main": trainer.state.is_world_process_zero,
        "world_size": args.world_size,
        "log_history": trainer.state.log_history,
        "param_sums": [float(p.detach().double().sum()) for p in model.parameters()],
        "budget_s": callback.budget_s,
        "evaluated": sorted(callback.outcomes),
        "worker": callback.state.worker.starts if callback.state is not None else None,
        "jobs": [(j.step, j.status) for j in callback.book.jobs()] if callback.book is not None else None,
    }))
    # both ranks leave together and take the process group down themselves: left to the interpreter's exit, its
    # gloo threads once outlived rank 0 ("terminate called without an active exception", SIGABRT)
    import torch.distributed as dist

    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
