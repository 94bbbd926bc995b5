"""`stored:PATH`: answers from an existing result JSON file (published harness schema, SPEC §8).

Each step is looked up by its key `task_id/step_idx`. The answer text is the stored
`raw_output` when the file has it, else `pred_preview` (1,200 or 500 characters: previews are
truncated), so the completion also carries the stored `pred_command_units` for the scorer.
"""
from __future__ import annotations

from pathlib import Path

from lab.engines.logprobs import cut_record, read_record
from lab.engines.base import Completion, EngineInfo, Request, Sampling
from lab.engines.common import EngineBase, EngineConfig, OnDone
from lab.engines.spec import short_name
from lab.errors import EngineLoadError, EngineSpecError, ResultFileError
from lab.resultfiles.files import read_result_file, scorer_for
from lab.resultfiles.units import coerce_units
from lab.tb2lite import CORRECTED

NOT_IN_RUN = "not in this run"


def _count(value: object) -> int | None:
    """A token count the run recorded (None when absent or not a whole number)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def stored_units(row: dict) -> list[str] | None:
    """The row's stored `pred_command_units` (a list, or its Python repr in some legacy files);
    None when the row has none, so the pipeline parses the text instead."""
    if row.get("pred_command_units") is None:
        return None
    return coerce_units(row["pred_command_units"])


class StoredEngine(EngineBase):
    """Replays the answers stored in one result file. Its name is the file's stem (known before
    loading, so a pool can show it at once); `describe()` gives the stored model."""

    kind = "stored"
    usage = "stored:PATH"
    answers_from_data = True
    stored_run = True
    OPTIONS: dict[str, str] = {}

    def __init__(self, config: EngineConfig) -> None:
        if not config.target:
            raise EngineSpecError(f"engine spec '{config.spec}': give the result file, e.g. stored:results/run.json")
        self.path = Path(config.target).expanduser()
        super().__init__(config, model_id=str(self.path), name=self.path.stem)
        self.result: dict = {}
        self.rows: dict[str, dict] = {}
        self.scorer = CORRECTED  # the stored run's own scorer once loaded (legacy runs: "legacy")

    def load(self) -> None:
        try:
            self.result = read_result_file(self.path)
        except ResultFileError as exc:
            raise EngineLoadError(f"stored engine: {exc}") from None
        rows: dict[str, dict] = {}
        for row in self.result.get("per_step") or []:
            if isinstance(row, dict) and "task_id" in row and "step_idx" in row:
                if row.get("logprobs") is not None:  # alternatives past k are never kept nor shown
                    row["logprobs"] = cut_record(row["logprobs"])
                rows[f"{row['task_id']}/{row['step_idx']}"] = row
        self.rows = rows
        self.scorer = scorer_for(self.result) if rows else CORRECTED
        model = self.result.get("model_path") or self.result.get("model")
        if model:
            self.model_id = str(model)
        self.loaded = True

    def completion_for(self, request: Request) -> Completion:
        row = self.rows.get(request.step.key)
        if row is None:
            return Completion(text="", error=f"step {request.step.key} is not in {self.path}", absent=True)
        text = row.get("raw_output")
        if not isinstance(text, str):
            text = row.get("pred_preview") if isinstance(row.get("pred_preview"), str) else ""
        try:
            units = stored_units(row)
        except ValueError as exc:
            return Completion(text=text, error=f"{self.path} step {request.step.key}: {exc}", stored=row)
        logprobs, why = read_record(row.get("logprobs"))  # (None, None): the run recorded none
        noted = row.get("logprobs_error")
        return Completion(
            text=text,
            finish_reason=row.get("finish_reason"),
            stop_reason=row.get("stop_reason"),
            command_units=units,
            stored=row,
            prompt_tokens=_count(row.get("prompt_tokens")),
            completion_tokens=_count(row.get("completion_tokens")),
            logprobs=logprobs,
            logprobs_error=why or (noted[:300] if isinstance(noted, str) and logprobs is None else None),
        )

    def covers(self, key: str) -> bool:
        """Only the steps the stored run answered (its file leaves the others out)."""
        return key in self.rows

    def generate(self, requests: list[Request], sampling: Sampling, on_done: OnDone | None = None) -> list[Completion]:
        results: list = [None] * len(requests)
        for i, request in enumerate(requests):
            self.finish(i, self.completion_for(request), results, on_done)
        return results

    def describe(self) -> EngineInfo:
        steps = len(self.rows)
        short = self.result.get("model_short") or short_name(self.model_id)
        return EngineInfo(kind=self.kind, model=self.model_id, device="none", notes=f"{short}: {steps} stored steps from {self.path}")
