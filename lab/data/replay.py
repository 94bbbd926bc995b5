"""Load a replay set (any of the three record formats) into `Step`s, strict or lenient."""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from lab.data.conversations import steps_from_conversation
from lab.data.history import (
    builder_parse_ref,
    builder_ref_ok,
    flatten_history,
    ref_is_scored,
    source_group_of,
)
from lab.data.records import RawRecord, check_step_record, iter_jsonl, record_format
from lab.data.step import MAX_STEP_IDX, Step, bucket_of
from lab.errors import LabError, ReplayFormatError
from lab.tb2lite import CORRECTED, REPLAY_MODES

ReplayMode = Literal["corrected", "all"]
MODES: tuple[str, ...] = REPLAY_MODES


@dataclass
class ReplaySet:
    """The steps of one replay source, in dataset order, plus the problems met while loading."""

    steps: list[Step]
    path: str
    mode: str = CORRECTED
    problems: list[ReplayFormatError] = field(default_factory=list)
    formats: dict[str, int] = field(default_factory=dict)
    fingerprint: str = ""  # sha256 of the source's bytes (or of its rows as JSON): what a checkpoint pins

    def __post_init__(self) -> None:
        self.by_key: dict[str, Step] = {s.key: s for s in self.steps}
        self.tasks: list[str] = list(dict.fromkeys(s.task_id for s in self.steps))
        self._by_task: dict[str, list[Step]] = {}
        for s in self.steps:
            self._by_task.setdefault(s.task_id, []).append(s)

    def __len__(self) -> int:
        return len(self.steps)

    def steps_for_task(self, task_id: str) -> list[Step]:
        """The steps of one task in order (empty when the task is unknown)."""
        return list(self._by_task.get(task_id, []))

    def manifest(self) -> dict:
        """Counts of the set, in the spirit of the builder's manifest (SPEC §1)."""
        return {
            "input_path": self.path,
            "mode": self.mode,
            "num_tasks": len(self.tasks),
            "num_steps": len(self.steps),
            "buckets": bucket_counts(self.steps),
            "source_groups": sorted({s.source_group for s in self.steps}),
            "source_group_steps": dict(sorted(Counter(s.source_group for s in self.steps).items())),
            "formats": dict(self.formats),
            "problems": len(self.problems),
        }


class _Problems:
    """Raise on the first problem (strict) or collect them (lenient)."""

    def __init__(self, lenient: bool):
        self.lenient, self.items = lenient, []

    def __call__(self, error: ReplayFormatError) -> None:
        if not self.lenient:
            raise error
        self.items.append(error)

    def add_all(self, errors: list[ReplayFormatError]) -> bool:
        for error in errors:
            self(error)
        return not errors


def _step_from_record(record: RawRecord, messages: list[dict], prompt: str, fmt: str) -> Step:
    data = record.data
    task_id = data["task_id"]
    step_idx = data["step_idx"]
    source = data.get("source") or ""
    total = data.get("total_steps")
    parsed = builder_parse_ref(data["ref_raw"])
    known = set(Step.__dataclass_fields__) | {"messages", "prompt"}
    return Step(
        task_id=task_id,
        sample_idx=data["sample_idx"] if isinstance(data.get("sample_idx"), int) else _sample_from_task(task_id),
        step_idx=step_idx,
        total_steps=total if isinstance(total, int) else step_idx + 1,
        is_final_step=bool(data["is_final_step"]) if "is_final_step" in data else (total == step_idx + 1),
        source=source,
        source_group=data.get("source_group") or source_group_of(source),
        messages=tuple(messages),
        prompt=prompt,
        ref_raw=data["ref_raw"],
        ref_parse_ok=builder_ref_ok(parsed),
        line_no=record.line,
        extra={"format": fmt, **{k: v for k, v in data.items() if k not in known}},
    )


def _sample_from_task(task_id: str) -> int:
    digits = "".join(ch for ch in task_id if ch.isdigit())
    return int(digits) if digits else 0


def steps_from_records(records: Iterable[RawRecord], path: str, problems: _Problems) -> tuple[list[Step], Counter]:
    """All steps (unfiltered) of decoded records, rebuilding per-turn histories per task."""
    steps: list[Step] = []
    formats: Counter = Counter()
    turns: dict[str, list[dict]] = {}  # per-turn format: the task's history so far
    for record in records:
        fmt = record_format(record.data)
        formats[fmt] += 1
        if fmt == "conversations":
            try:
                steps.extend(steps_from_conversation(record, record.line - 1, True, True, path))
            except ReplayFormatError as error:
                problems(error)
            continue
        if not problems.add_all(check_step_record(path, record)):
            continue
        data = record.data
        if fmt == "messages":
            messages = [dict(m) if isinstance(m, dict) else m for m in data["messages"]]
            prompt = data["prompt"] if isinstance(data.get("prompt"), str) else flatten_history(
                m for m in messages if isinstance(m, dict)
            )
            steps.append(_step_from_record(record, messages, prompt, fmt))
            continue
        history = turns.setdefault(data["task_id"], [])
        history.append({"role": "user", "content": data["prompt"]})
        snapshot = [dict(m) for m in history]
        steps.append(_step_from_record(record, snapshot, flatten_history(snapshot), fmt))
        history.append({"role": "assistant", "content": data["ref_raw"]})
    return _unique_steps(steps, path, problems), formats


def _unique_steps(steps: list[Step], path: str, problems: _Problems) -> list[Step]:
    """Steps whose key is new and whose step_idx the result files accept; the others are problems."""
    first_line: dict[str, int] = {}
    kept = []
    for step in steps:
        if step.step_idx > MAX_STEP_IDX:
            problems(ReplayFormatError(path, step.line_no, "step_idx",
                                       f"out of range: {step.step_idx} (expected 0 to {MAX_STEP_IDX})"))
        elif step.key in first_line:
            problems(ReplayFormatError(path, step.line_no, "step_idx",
                                       f"duplicate step {step.key} (first at line {first_line[step.key]})"))
        else:
            first_line[step.key] = step.line_no
            kept.append(step)
    return kept


def _keep(step: Step, mode: str) -> bool:
    if mode == "all":
        return True
    return ref_is_scored(step.ref_raw)


def load_replay(source: str | Path | Iterable[dict] | None, mode: ReplayMode = CORRECTED, lenient: bool = False,
                settings=None) -> ReplaySet:
    """Load replay steps from a `.jsonl` path, rows (dicts), or any source `resolve_replay_source` knows
    (None: `settings.replay_path`, else the cached download).

    `mode="corrected"` keeps only steps whose reference the builder parses to a non-empty
    object with at least one command unit (the 303-step rule); `"all"` keeps every step.
    Strict loading raises the first `ReplayFormatError`; lenient loading collects them.
    """
    if mode not in MODES:
        raise LabError(f"unknown replay mode {mode!r}: use one of {', '.join(MODES)}")
    problems = _Problems(lenient)
    hasher = hashlib.sha256()
    if source is None or isinstance(source, (str, Path)):
        from lab.data.sources import resolve_replay_source

        resolved = resolve_replay_source(None if source is None else str(source), settings, check=check_replay_file)
        path, rows = resolved.label, resolved.rows
    else:
        path, rows = "<rows>", [dict(row) for row in source]
    if rows is None:
        records = iter_jsonl(resolved.path, problems, hasher)
    else:
        hasher.update(json.dumps(rows, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
        records = _row_records(rows)
    steps, formats = steps_from_records(records, path, problems)
    kept = [s for s in steps if _keep(s, mode)]
    return ReplaySet(steps=kept, path=path, mode=mode, problems=problems.items, formats=dict(formats),
                     fingerprint=hasher.hexdigest())


def check_replay_file(path: Path, url: str) -> None:
    """A downloaded file is a replay file: every line a valid record (strict, as `load_replay` reads it) and
    at least one step; LabError naming the URL and the line otherwise (a download's format check)."""
    problems = _Problems(lenient=False)
    try:
        steps, _ = steps_from_records(iter_jsonl(path, problems), url, problems)
    except ReplayFormatError as exc:
        where = f"line {exc.line}" + (f" field '{exc.field}'" if exc.field else "")
        raise LabError(f"the file from {url} is not a replay file ({where}: {exc.problem[:200]}); nothing was kept") from None
    if not steps:
        raise LabError(f"the file from {url} is not a replay file (no steps in it); nothing was kept")
    from lab.data.download import pinned_shape

    found = {"steps": len(steps), "tasks": len({s.task_id for s in steps})}
    wrong = [f"{found[key]} {key}, expected {count}" for key, count in pinned_shape(url).items() if found[key] != count]
    if wrong:
        raise LabError(f"the file from {url} is not the pinned replay file ({', '.join(wrong)}); nothing was kept")


def _row_records(rows: Iterable[dict]) -> Iterable[RawRecord]:
    for i, row in enumerate(rows, start=1):
        yield RawRecord(i, dict(row))


def bucket_counts(steps: Iterable[Step]) -> dict[str, int]:
    """Steps per bucket, in early/mid/late order."""
    counts = Counter(bucket_of(s.step_idx) for s in steps)
    return {b: counts.get(b, 0) for b in ("early", "mid", "late")}
