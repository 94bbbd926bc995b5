"""Errors a user can cause. Each names the input and what to do."""
from __future__ import annotations


class LabError(Exception):
    """Base class for user-facing errors: the message is shown as is (CLI line, UI notice)."""


class ReplayFormatError(LabError):
    """A replay record is malformed: names the file, the 1-based line and the field."""

    def __init__(self, path: str, line: int, field: str | None, problem: str):
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        where = f"{self.path}:{line}" + (f" field '{field}'" if field else "")
        super().__init__(f"{where}: {problem}")


class ResultFileError(LabError):
    """A result JSON file cannot be read or lacks what the lab needs."""


class EngineSpecError(LabError):
    """An engine SPEC string or preset name is not understood."""


class EngineLoadError(LabError):
    """An engine failed to load (model missing, no GPU, vLLM not installed, …)."""


def os_error_line(exc: OSError) -> str:
    """An OSError a user caused (a path that cannot be made or written, a full disk) as one line: the path,
    then the system's reason."""
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
