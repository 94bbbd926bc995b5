"""Write a full-size replay (current format, with `messages`) built from the excerpt, for scale tests.

The public 303-step file cannot be downloaded on machines without internet; this repeats the
excerpt's tasks under new task ids (and cycles the source groups) until it has about as many
steps as the real set, so the UI and the store can be measured at full size:

    python bench/scale_replay.py               # writes ~/.cache/tb2lab/replay_scaled.jsonl and prints where
    python bench/bench_ui_switch.py --replay ~/.cache/tb2lab/replay_scaled.jsonl

The output is derived from reference data: it goes to the lab's cache folder (yours, outside the project,
never a fixed folder under /tmp another user may hold) unless --out names another file; never commit it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lab.data import load_replay  # noqa: E402
from lab.data.conversations import step_record  # noqa: E402
from lab.settings import default_cache_dir  # noqa: E402

EXCERPT = Path(__file__).resolve().parents[2] / "shared" / "tb2lite" / "replay_excerpt.jsonl"
GROUPS = ["code", "data_processing", "data_querying", "data_science", "debugging", "dependency_management",
          "file_operations", "math", "model_training", "scientific_computing", "security",
          "software_engineering", "swe", "system_administration"]  # the 14 groups of SPEC §1


MARK = "Task Description:"


def distinct_copy(step, n: int):
    """`step` with its task description (in the prompt and the first message naming it) marked as copy `n`."""
    mark = f"{MARK} (copy {n})"
    messages, named = [], False
    for message in step.messages:
        content = message.get("content")
        if not named and isinstance(content, str) and MARK in content:
            message, named = {**message, "content": content.replace(MARK, mark, 1)}, True
        messages.append(message)
    return dataclasses.replace(step, prompt=step.prompt.replace(MARK, mark, 1), messages=tuple(messages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None,
                        help="output .jsonl (default: replay_scaled.jsonl in the lab's cache folder, ~/.cache/tb2lab)")
    parser.add_argument("--steps", type=int, default=303, help="about how many steps to write")
    parser.add_argument("--distinct", action="store_true",
                        help="name each copy in its task description, so copies share only the instructions "
                             "before it (as distinct real tasks do) and a prefix cache cannot reuse one copy for another")
    args = parser.parse_args()
    base = load_replay(EXCERPT).steps
    out, n = [], 0
    while len(out) < args.steps:
        task = f"task-{n:03d}"
        src = base[0].task_id if n % 2 == 0 else base[-1].task_id
        group = GROUPS[n % len(GROUPS)]
        for step in (s for s in base if s.task_id == src):
            clone = dataclasses.replace(step, task_id=task, sample_idx=n, source_group=group,
                                        source=f"synthetic/{group}")
            if args.distinct:
                clone = distinct_copy(clone, n)
            out.append(step_record(clone))
        n += 1
    if args.out is None:
        args.out = str(default_cache_dir() / "replay_scaled.jsonl")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out[: args.steps]))
    print(f"wrote {min(len(out), args.steps)} steps of {n} tasks to {args.out}")


if __name__ == "__main__":
    main()
