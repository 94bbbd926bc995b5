"""What evaluating while training costs per save, on CPU, for the suite's tiny model (docs/training.md).

Trains the tiny random-weight Qwen2 of the tests (2 layers, hidden 32, a 400-token vocabulary, so the
excerpt's prompts are 4,900-10,800 tokens long) on the excerpt's reference answers, twice with the same
seed: without the callback, then with TB2LiteCallback on the model in memory. Prints one JSON object: the
machine (cores, load average before and after, versions), the settings, each save's evaluation seconds as
the trainer logged them (`tb2lite/eval_seconds`: replay, reference scoring when asked, result files and
the store import), the seconds per replayed step, and both trainings' wall times.

    python bench/bench_training_eval.py [--steps 3] [--max-tokens 32] [--saves 2] [--reference] [--replay PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import save_tiny_model  # noqa: E402
from tests.helpers_store import make_results_dir  # noqa: E402
from tests.paths import EXCERPT  # noqa: E402


def versions() -> dict:
    import tokenizers
    import torch
    import transformers

    from lab import __version__

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "lab": __version__}


def train(model_dir: Path, out: Path, callbacks: list, max_steps: int, save_steps: int) -> tuple[float, list[dict]]:
    """Wall seconds of `trainer.train()` and the log history."""
    from tests.training.helpers_training import reference_dataset, tiny_training_model
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=save_steps, logging_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True,
                             report_to="none", disable_tqdm=True)
    trainer = Trainer(model=tiny_training_model(model_dir), args=args, train_dataset=reference_dataset(tokenizer),
                      processing_class=tokenizer, data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                      callbacks=callbacks)
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start, trainer.state.log_history


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", default=str(EXCERPT))
    parser.add_argument("--steps", type=int, default=3, help="replay steps per save (the excerpt's first N)")
    parser.add_argument("--max-tokens", type=int, default=32, help="new tokens per answer (random weights rarely stop)")
    parser.add_argument("--saves", type=int, default=2)
    parser.add_argument("--save-steps", type=int, default=2, help="optimizer steps between saves")
    parser.add_argument("--reference", action="store_true", help="also score the reference answers' likelihood")
    args = parser.parse_args()

    from lab.training import TB2LiteCallback

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["LAB_RESULTS"] = str(make_results_dir(root))  # a store of its own, never the repo's
        model_dir = save_tiny_model(root / "model", hidden=32, heads=4, kv_heads=2, positions=32768)
        max_steps = args.saves * args.save_steps
        plain_s, _ = train(model_dir, root / "plain", [], max_steps, args.save_steps)
        callback = TB2LiteCallback(args.replay, limit=args.steps, max_tokens=args.max_tokens, reference=args.reference)
        with_s, history = train(model_dir, root / "bench", [callback], max_steps, args.save_steps)
    per_save = [h["tb2lite/eval_seconds"] for h in history if "tb2lite/eval_seconds" in h]
    failed = [h["step"] for h in history if h.get("tb2lite/eval_failed")]
    print(json.dumps({
        "benchmark": "evaluation while training, per save (bench/bench_training_eval.py)",
        "machine": {"cores": os.cpu_count(), "load_avg_before": [round(v, 2) for v in load_before],
                    "load_avg_after": [round(v, 2) for v in os.getloadavg()], "platform": platform.platform(),
                    "versions": versions()},
        "model": "tiny random-weight Qwen2: 2 layers, hidden 32, 400-token vocabulary (tests/conftest.py), float32",
        "settings": {"engine": "transformers (the model in memory)", "replay": args.replay, "steps_per_save": args.steps,
                     "max_tokens": args.max_tokens, "reference": args.reference, "saves": args.saves,
                     "optimizer_steps": max_steps},
        "per_save_s": per_save,
        "median_per_save_s": round(statistics.median(per_save), 3) if per_save else None,
        "per_replay_step_s": round(statistics.median(per_save) / args.steps, 3) if per_save else None,
        "failed_saves": failed,
        "train_s_without_callback": round(plain_s, 3),
        "train_s_with_callback": round(with_s, 3),
    }, indent=1))
    return 1 if failed or not per_save else 0


if __name__ == "__main__":
    raise SystemExit(main())
