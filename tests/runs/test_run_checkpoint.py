"""Issue 53: a run's checkpoint over its whole life is one class (lab.runs.checkpoint.RunCheckpoint), on a real runs
folder: its name claimed, its checkpoint begun, resumed (or refused when it is another run's), finished into the
result file in its place, and its name let go; the checkpoint's name is spelled in one place (claims.PARTIAL)."""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.runs.checkpoint import RunCheckpoint
from lab.runs.claims import PARTIAL, RunNameTaken, partial_path
from tests.paths import REPO


def refuse_other(path: Path, old: dict, new: dict) -> None:
    if old != new:
        raise LabError(f"{path}: another run")


def test_claim_begin_release_resume_finish(tmp_path):
    header = {"engine": "e", "steps": 2}
    with RunCheckpoint.claim(tmp_path, "run") as run:
        assert run.name == "run" and run.path == partial_path(tmp_path, "run") == tmp_path / f"run{PARTIAL}"
        assert run.begin(header, refuse_other) == (None, [])  # a new run: started with its header
        run.append({"task_id": "t", "step_idx": 0}, 0.25)
        run.sync()
    assert run.path.is_file()  # released holding a step: kept for a later resume

    with pytest.raises(RunNameTaken, match="pass --resume to continue it"):
        RunCheckpoint.claim(tmp_path, "run", explicit=True)
    notes: list[str] = []
    with RunCheckpoint.claim(tmp_path, "run", notify=notes.append) as other:  # a made-up name moves on
        assert other.name == "run-2" and notes and "run-2" in notes[0]

    with pytest.raises(LabError, match="another run"):
        with RunCheckpoint.claim(tmp_path, "run", resume=True) as run:
            run.begin({**header, "steps": 3}, refuse_other)
    with RunCheckpoint.claim(tmp_path, "run", resume=True) as run:
        old, entries = run.begin(header, refuse_other)
        assert old == header and [(e.row["step_idx"], e.gen_sec) for e in entries] == [(0, 0.25)]
        run.append({"task_id": "t", "step_idx": 1}, 0.5)
        path = run.finish({"per_step": [e.row for e in entries]})
    assert path == tmp_path / "run.json" and json.loads(path.read_text())["per_step"][0]["step_idx"] == 0
    assert not run.path.exists()  # the checkpoint goes once the result file is in its place


def test_a_run_failing_before_its_first_step_leaves_its_name_free(tmp_path):
    with pytest.raises(RuntimeError):
        with RunCheckpoint.claim(tmp_path, "run") as run:
            run.begin({"engine": "e"}, refuse_other)
            raise RuntimeError("the engine died")
    assert not partial_path(tmp_path, "run").exists()
    with RunCheckpoint.claim(tmp_path, "run", explicit=True) as again:
        assert again.name == "run"


def test_a_link_in_place_of_the_checkpoint_is_refused(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not the lab's")
    runs = tmp_path / "runs"
    runs.mkdir()
    os.symlink(outside, partial_path(runs, "run"))
    with pytest.raises(RunNameTaken, match="symbolic link"):
        RunCheckpoint.claim(runs, "run", resume=True)
    assert outside.read_text() == "not the lab's"


def spellings(source: str) -> list[int]:
    """Lines of `source` whose code (a string, an f-string's text; not a docstring) spells the checkpoint's ending."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and ".partial.jsonl" in node.value]


def test_the_checkpoint_name_is_spelled_once_in_the_code():
    found = {str(path.relative_to(REPO)): lines for path in sorted((REPO / "lab").rglob("*.py"))
             if (lines := spellings(path.read_text(encoding="utf-8")))}
    assert found == {"lab/runs/claims.py": [found.get("lab/runs/claims.py", [0])[0]]}, found
    assert spellings('"""A `NAME.partial.jsonl` docstring."""\np = out / f"{stem}.partial.jsonl"\n') == [2]
