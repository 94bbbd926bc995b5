"""Stored result files for UI tests: runs with long, alike names and runs that lack some steps."""
from __future__ import annotations

from pathlib import Path

from lab.resultfiles.files import write_result_file
from lab.scoring.aggregate import aggregate_scores
from tests.ui.test_ui_handlers import write_stored_run

# per-step wall times: the only per-step fields two runs of one engine on the same steps may differ in
TIMINGS = frozenset({"latency_s", "ttft_s"})


def untimed_steps(rows: list[dict]) -> list[dict]:
    """A run's per-step rows without their timings (TIMINGS): what two runs of one engine must agree on."""
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


# two runs of one series whose names differ only at the end, one that differs in the middle
LONG_NAMES = (
    "LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-2Epoch-FullFT-SameCount-checkpoint-100",
    "LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-2Epoch-FullFT-SameCount-checkpoint-200",
    "LLM-OS-Models/Qwen3.5-2B-Terminal-SFT-lr3e-5-FullFT-SameCount-checkpoint-100",
)


def write_run_without(path: Path, name: str, task_id: str, offset: int = 0) -> dict:
    """A stored run (as `write_stored_run`) without any step of `task_id`, its aggregate recomputed."""
    result = write_stored_run(path, name, offset)
    rows = [r for r in result["per_step"] if r["task_id"] != task_id]
    result = {**result, "per_step": rows, "aggregate": aggregate_scores(rows)}
    write_result_file(path, result)
    return result
