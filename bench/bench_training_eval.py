"""Evaluation while training: what TB2LiteCallback costs per save, on CPU, for the tests' tiny model.

Trains the tiny random-weight Qwen2 of the tests (2 layers, hidden 32, a 400-token vocabulary, so the
excerpt's prompts are 4,900-10,800 tokens long) on the excerpt's reference answers twice with the same
seed: without the callback, then with TB2LiteCallback replaying the model in memory at every save. The
figures: each save's evaluation as the trainer logged it (`tb2lite/eval_seconds`: replay, reference scoring
when asked, result files, the store import), per replayed step, and both trainings' wall times; the checks:
no evaluation failed, and the parameters after training are those of the run without the callback.

    python bench/bench_training_eval.py [--steps 3] [--max-tokens 32] [--saves 2] [--reference] [--replay PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import Record  # noqa: E402
from tests.conftest import save_tiny_model  # noqa: E402
from tests.helpers_store import make_results_dir  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402


def train(model_dir: Path, out: Path, callbacks: list, max_steps: int, save_steps: int):
    """(wall seconds of `trainer.train()`, the log history, the trained model)."""
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from tests.training.helpers_training import reference_dataset, tiny_training_model

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = tiny_training_model(model_dir)
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=save_steps, logging_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True,
                             report_to="none", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False), callbacks=callbacks)
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start, trainer.state.log_history, model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--steps", type=int, default=3, help="replay steps per save (the excerpt's first N)")
    parser.add_argument("--max-tokens", type=int, default=32, help="new tokens per answer (random weights rarely stop)")
    parser.add_argument("--saves", type=int, default=2)
    parser.add_argument("--save-steps", type=int, default=2, help="optimizer steps between saves")
    parser.add_argument("--reference", action="store_true", help="also score the reference answers' likelihood")
    args = parser.parse_args()
    record = Record("bench_training_eval", packages=("torch", "transformers", "tokenizers", "accelerate"))

    from lab.training import TB2LiteCallback
    from tests.training.helpers_training import same_parameters

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["LAB_RESULTS"] = str(make_results_dir(root))  # a store of its own, never the repo's
        model_dir = save_tiny_model(root / "model", hidden=32, heads=4, kv_heads=2, positions=32768)
        max_steps = args.saves * args.save_steps
        plain_s, _, plain = train(model_dir, root / "plain", [], max_steps, args.save_steps)
        callback = TB2LiteCallback(args.replay, limit=args.steps, max_tokens=args.max_tokens, reference=args.reference)
        with_s, history, model = train(model_dir, root / "bench", [callback], max_steps, args.save_steps)
        unchanged = same_parameters(model, plain)
        gen = [json.loads(o.result_path.read_text())["gen_time_sec"] for o in callback.outcomes.values() if o.result_path]
    per_save = [h["tb2lite/eval_seconds"] for h in history if "tb2lite/eval_seconds" in h]
    failed = [h["step"] for h in history if h.get("tb2lite/eval_failed")]
    record.setting(model="tiny Qwen2, 2 layers, hidden 32, float32", engine="transformers (in memory)",
                   replay=Path(args.replay).name, steps_per_save=args.steps, max_tokens=args.max_tokens,
                   reference=args.reference, saves=args.saves, optimizer_steps=max_steps)
    if per_save:
        record.figure("evaluation per save", statistics.median(per_save), "s",
                      note=f"median of {len(per_save)} saves ({', '.join(f'{s:.1f}' for s in per_save)} s): replay, "
                           "result file, store import")
        record.figure("evaluation per replayed step", statistics.median(per_save) / args.steps, "s")
    if gen:
        record.figure("of which generation", statistics.median(gen), "s",
                      note="median gen_time_sec of the result files; the rest: rendering, files, run names, the store")
    record.figure("training without the callback", plain_s, "s", note=f"{max_steps} optimizer steps, {args.saves} saves")
    record.figure("the same training with the callback", with_s, "s")
    record.check("every save evaluated, none failed", len(per_save) == args.saves and not failed,
                 detail=f"failed at steps {failed}" if failed else "")
    record.check("parameters identical to the training without the callback", unchanged)
    record.write()
    return 0 if per_save and not failed and unchanged else 1


if __name__ == "__main__":
    raise SystemExit(main())
