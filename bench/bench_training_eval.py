"""Evaluation while training: what TB2LiteCallback costs the training, on CPU, for the tests' tiny model, in the
training's turn and beside it (background=True).

Trains the tiny random-weight Qwen2 of the tests (2 layers, hidden 32, a 400-token vocabulary, so the
excerpt's prompts are 4,900-10,800 tokens long) on the excerpt's reference answers with the same seed four
times: without the callback; with it in the training's turn (the model in memory, training waits); beside
training with `wait_at_end_s=0` (train() returns at once, the worker finishes on its own); and beside training
with the default wait at the end. Callbacks placed just before and just after TB2LiteCallback time how long
each save (and each step's end) holds the training loop. The figures: that hold per save in each mode, each
training's wall time, each save's evaluation (`tb2lite/eval_seconds`) and its generation share, and when the
last result lands after train() returns; the checks: every save evaluated, none failed, the parameters after
training those of the run without the callback, the background hold under a second.

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

HOLD_BOUND_S = 1.0


def train(model_dir: Path, out: Path, callback, max_steps: int, save_steps: int) -> dict:
    """Train once; the wall seconds of `trainer.train()`, when it returned, the log history, the model, and what
    the callback held each save and each step's end for."""
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from tests.training.helpers_training import clock, reference_dataset, tiny_training_model

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = tiny_training_model(model_dir)
    before, after = clock(), clock()
    callbacks = [before, callback, after] if callback is not None else []
    args = TrainingArguments(output_dir=str(out), max_steps=max_steps, save_steps=save_steps, logging_steps=1,
                             per_device_train_batch_size=2, learning_rate=1e-2, seed=0, use_cpu=True,
                             report_to="none", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=reference_dataset(tokenizer), processing_class=tokenizer,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False), callbacks=callbacks)
    start = time.perf_counter()
    trainer.train()
    returned = time.perf_counter()
    holds = [after.saves[s] - before.saves[s] for s in before.saves]
    step_holds = [after.steps[s] - before.steps[s] for s in before.steps]
    return {"wall": returned - start, "returned_at": time.time(), "history": trainer.state.log_history,
            "model": model, "save_holds": holds, "step_holds": step_holds}


def wait_for_jobs(callback, timeout: float = 1800.0) -> list:
    """The series' jobs once none is left queued or running (the worker goes on after train() returned)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        jobs = callback.book.jobs()
        if jobs and all(j.status in ("done", "failed", "skipped") for j in jobs):
            return jobs
        time.sleep(0.2)
    return callback.book.jobs()


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

    def callback(**mode):
        return TB2LiteCallback(args.replay, limit=args.steps, max_tokens=args.max_tokens, reference=args.reference,
                               **mode)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["LAB_RESULTS"] = str(make_results_dir(root))  # a store of its own, never the repo's
        model_dir = save_tiny_model(root / "model", hidden=32, heads=4, kv_heads=2, positions=32768)
        max_steps = args.saves * args.save_steps
        plain = train(model_dir, root / "plain", None, max_steps, args.save_steps)
        in_turn_cb = callback()
        in_turn = train(model_dir, root / "in-turn", in_turn_cb, max_steps, args.save_steps)
        gen = [json.loads(Path(o.result_path).read_text())["gen_time_sec"] for o in in_turn_cb.outcomes.values()
               if o.result_path]
        beside_cb = callback(background=True, wait_at_end_s=0)
        beside = train(model_dir, root / "beside", beside_cb, max_steps, args.save_steps)
        beside_jobs = wait_for_jobs(beside_cb)
        waited_cb = callback(background=True)
        waited = train(model_dir, root / "waited", waited_cb, max_steps, args.save_steps)
        waited_jobs = waited_cb.book.jobs()
        unchanged = {name: same_parameters(run["model"], plain["model"])
                     for name, run in (("in the training's turn", in_turn), ("beside training", beside),
                                       ("beside training, waiting at the end", waited))}
    per_save = [h["tb2lite/eval_seconds"] for h in in_turn["history"] if "tb2lite/eval_seconds" in h]
    failed = [h["step"] for h in in_turn["history"] if h.get("tb2lite/eval_failed")]
    beside_seconds = [j.seconds for j in beside_jobs if j.seconds is not None]
    record.setting(model="tiny Qwen2, 2 layers, hidden 32, float32", engine="transformers (in memory / saved folder "
                   "in the worker, cpu)", replay=Path(args.replay).name, steps_per_save=args.steps,
                   max_tokens=args.max_tokens, reference=args.reference, saves=args.saves, optimizer_steps=max_steps)
    record.figure("training waits per save, in the training's turn", statistics.median(in_turn["save_holds"]), "s",
                  note=f"median of {len(in_turn['save_holds'])} saves, timed by callbacks just before and after it")
    record.figure("training waits per save, beside training", max(beside["save_holds"] + waited["save_holds"]), "s",
                  note=f"the longest of {len(beside['save_holds']) + len(waited['save_holds'])} saves (under "
                       f"{HOLD_BOUND_S:g} s wanted); the longest step's end: "
                       f"{max(beside['step_holds'] + waited['step_holds']) * 1000:.1f} ms")
    record.figure("training without the callback", plain["wall"], "s", note=f"{max_steps} optimizer steps, "
                  f"{args.saves} saves")
    record.figure("training with the callback, in the training's turn", in_turn["wall"], "s")
    record.figure("training with the callback, beside training (wait_at_end_s=0)", beside["wall"], "s",
                  note="train() returns at once; the worker goes on")
    last = max((j.finished_at or 0) for j in beside_jobs) if beside_jobs else None
    record.figure("the last result lands after train() returns (wait_at_end_s=0)",
                  (last - beside["returned_at"]) if last else None, "s",
                  note="the worker's start (its imports) and every save's evaluation after the short training")
    record.figure("training with the callback, beside training, waiting at the end", waited["wall"], "s",
                  note="the default wait_at_end_s: train() returns when the last result has reached the trainer's log")
    if per_save:
        record.figure("evaluation per save, in the training's turn", statistics.median(per_save), "s",
                      note=f"median of {len(per_save)} saves ({', '.join(f'{s:.1f}' for s in per_save)} s): replay, "
                           "result file, store import")
        record.figure("evaluation per replayed step", statistics.median(per_save) / args.steps, "s")
    if beside_seconds:
        record.figure("evaluation per save, beside training", statistics.median(beside_seconds), "s",
                      note="the worker loads the saved folder for each save, then replays it")
    if gen:
        record.figure("of which generation", statistics.median(gen), "s",
                      note="median gen_time_sec of the result files; the rest: rendering, files, run names, the store")
    record.check("every save evaluated in the training's turn, none failed", len(per_save) == args.saves and not failed,
                 detail=f"failed at steps {failed}" if failed else "")
    for name, jobs in (("beside training", beside_jobs), ("beside training, waiting at the end", waited_jobs)):
        record.check(f"every save evaluated {name}", len(jobs) == args.saves and all(j.status == "done" for j in jobs),
                     detail="; ".join(f"{j.label}: {j.status} {j.reason or ''}" for j in jobs if j.status != "done"))
    for name, same in unchanged.items():
        record.check(f"parameters identical to the training without the callback ({name})", same)
    record.check(f"training never waits {HOLD_BOUND_S:g} s in the callback beside training",
                 max(beside["save_holds"] + waited["save_holds"] + beside["step_holds"] + waited["step_holds"])
                 < HOLD_BOUND_S)
    record.write()
    return 0 if all(c["passed"] for c in record.as_dict()["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
