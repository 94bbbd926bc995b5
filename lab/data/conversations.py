"""Walk raw source conversations into scored steps exactly as the corrected builder (SPEC §1)."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterable

from lab.data.history import (
    builder_commands,
    builder_parse_ref,
    builder_ref_ok,
    builder_units,
    flatten_history,
    normalize_message,
    source_group_of,
)
from lab.data.records import CONVERSATION_FIELDS_REQUIRED, RawRecord, check_fields, iter_jsonl
from lab.data.step import Step
from lab.errors import ReplayFormatError


def _raise(error: ReplayFormatError) -> None:
    raise error


def conversation_rows(path_or_rows: str | Path | Iterable[dict]) -> list[RawRecord]:
    """Source rows with their 1-based line numbers (a list's rows are numbered from 1)."""
    if isinstance(path_or_rows, (str, Path)):
        return list(iter_jsonl(Path(path_or_rows), _raise))
    return [RawRecord(i, dict(row)) for i, row in enumerate(path_or_rows, start=1)]


def steps_from_conversation(
    record: RawRecord,
    sample_idx: int,
    include_invalid_refs: bool = False,
    include_empty_command_refs: bool = False,
    path: str = "<rows>",
) -> list[Step]:
    """The steps of one conversation (one source line)."""
    for problem in check_fields(path, record, CONVERSATION_FIELDS_REQUIRED):
        raise problem
    conversation = record.data["conversations"]
    source = record.data.get("_source_file") or ""
    source = source if isinstance(source, str) else str(source)
    total_steps = sum(1 for m in conversation if isinstance(m, dict) and m.get("role") == "assistant")
    task_id = f"task-{sample_idx:03d}"
    history: list[dict] = []
    counter = 0
    steps: list[Step] = []
    for raw in conversation:
        message = normalize_message(raw)
        if message is None:
            continue
        if message["role"] != "assistant":
            history.append(message)
            continue
        if not history:
            continue  # assistant before any history: skipped, counter does not move
        parsed = builder_parse_ref(message["content"])
        ok = builder_ref_ok(parsed)
        units = builder_units(parsed) if ok else []
        emit = (ok or include_invalid_refs) and (bool(units) or include_empty_command_refs)
        if emit:
            ref = parsed if isinstance(parsed, dict) else {}
            steps.append(
                Step(
                    task_id=task_id,
                    sample_idx=sample_idx,
                    step_idx=counter,
                    total_steps=total_steps,
                    is_final_step=counter == total_steps - 1,
                    source=source,
                    source_group=source_group_of(source),
                    messages=tuple(dict(m) for m in history),
                    prompt=flatten_history(history),
                    ref_raw=message["content"],
                    ref_parse_ok=ok,
                    line_no=record.line,
                    extra={
                        "format": "conversations",
                        "ref_analysis": ref.get("analysis", ""),
                        "ref_plan": ref.get("plan", ""),
                        "ref_task_complete": bool(ref.get("task_complete")),
                        "ref_commands": builder_commands(ref),
                        "ref_command_units": units,
                    },
                )
            )
        history.append(message)
        counter += 1
    return steps


def steps_from_conversations(
    path_or_rows: str | Path | Iterable[dict],
    include_invalid_refs: bool = False,
    include_empty_command_refs: bool = False,
) -> list[Step]:
    """All steps of a source file (`conversations` + `_source_file` per line; line i is sample i)."""
    path = str(path_or_rows) if isinstance(path_or_rows, (str, Path)) else "<rows>"
    steps: list[Step] = []
    for record in conversation_rows(path_or_rows):
        steps.extend(
            steps_from_conversation(record, record.line - 1, include_invalid_refs, include_empty_command_refs, path)
        )
    return steps


def step_record(step: Step) -> dict:
    """A step as a `replay_full.jsonl` record (current format, with `messages`)."""
    return {
        "task_id": step.task_id,
        "sample_idx": step.sample_idx,
        "step_idx": step.step_idx,
        "total_steps": step.total_steps,
        "is_final_step": step.is_final_step,
        "source": step.source,
        "source_group": step.source_group,
        "prompt": step.prompt,
        "messages": [dict(m) for m in step.messages],
        "ref_raw": step.ref_raw,
        "ref_parse_ok": step.ref_parse_ok,
        **{k: v for k, v in step.extra.items() if k.startswith("ref_")},
    }


def dev_subset(task_groups: dict[str, str] | Iterable[tuple[str, str]], n: int = 20, seed: int = 42) -> list[str]:
    """The dev-subset rule (SPEC §1): chosen task ids, in the order they were picked.

    `task_groups` maps task id -> source group in dataset order. Each group is shuffled
    with one shared `random.Random(seed)` in first-seen order; then round-robin over the
    sorted group names takes the last element of each group until `n` tasks are chosen.
    """
    pairs = task_groups.items() if isinstance(task_groups, dict) else task_groups
    groups: dict[str, list[str]] = {}
    for task_id, group in pairs:
        groups.setdefault(group, []).append(task_id)
    rng = random.Random(seed)
    for members in groups.values():
        rng.shuffle(members)
    chosen: list[str] = []
    names = sorted(groups)
    while len(chosen) < n and any(groups[g] for g in names):
        for name in names:
            if len(chosen) >= n:
                break
            if groups[name]:
                chosen.append(groups[name].pop())
    return chosen
