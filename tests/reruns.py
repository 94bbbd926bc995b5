"""What a rerun would hide, shown: every failure followed by a rerun (tests/markers.py gives tests driving real
processes one), printed at the end of the run with its output, so that a rare failure is seen and can be chased
even when its rerun passes (a test failing again is also listed as FAILED, as always)."""
from __future__ import annotations

import pytest

TAIL_LINES = 80  # of each first failure's traceback and of its captured output
HEAD_LINES = 40  # of its captured output too: a diagnosis printed there (lab_side_story) starts with what counts

_first_failures: list[pytest.TestReport] = []


def _tail(text: str, n: int = TAIL_LINES) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join((["…"] if len(lines) > n else []) + lines[-n:])


def _head_and_tail(text: str, head: int = HEAD_LINES, tail: int = TAIL_LINES) -> str:
    lines = text.rstrip().splitlines()
    if len(lines) <= head + tail:
        return "\n".join(lines)
    return "\n".join([*lines[:head], f"… {len(lines) - head - tail} lines …", *lines[-tail:]])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.outcome == "rerun":
        _first_failures.append(report)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _first_failures:
        return
    terminalreporter.section("failures followed by a rerun (tests/reruns.py)", sep="=")
    for report in _first_failures:
        terminalreporter.section(f"{report.nodeid} ({report.when})", sep="_")
        terminalreporter.line(_tail(report.longreprtext))
        for title, content in report.sections:
            if content.strip():
                terminalreporter.line(f"--- {title} ---")
                terminalreporter.line(_head_and_tail(content))
