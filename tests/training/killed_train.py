"""A training run with TB2LiteCallback(background=True) that is killed (SIGKILL) in the middle of its second save's
evaluation, after the first one finished: what a crash, an out-of-memory kill or a preempted job leaves.

    python tests/training/killed_train.py MODEL_DIR OUT REPLAY
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    from transformers import TrainerCallback

    from lab.training import TB2LiteCallback
    from tests.training.helpers_training import train_tiny

    model_dir, out, replay = (Path(a) for a in sys.argv[1:4])
    callback = TB2LiteCallback(str(replay), max_tokens=64, background=True, engine_options={"batch_size": 1})

    def job(step: int):
        return callback.book.get(f"{step:09d}-save")

    class KillAtSecondSave(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 2:  # the first evaluation finishes before training goes on
                while job(2) is None or job(2).status != "done":
                    time.sleep(0.1)
            if state.global_step == 4:  # the second is under way, a step of it finished: the crash
                runs = Path(callback.options.results)
                partial = runs / f"{out.name}-checkpoint-4.partial.jsonl"
                while not (partial.is_file() and len(partial.read_text().splitlines()) >= 2):
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)

    train_tiny(model_dir, out, [callback, KillAtSecondSave()])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
