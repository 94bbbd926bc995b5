"""`python -m lab rescore` on files built from golden rows, both scorers; rescore_many."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.synthetic import make_results
from lab.runs.rescore import rescore_many, rescore_result
from lab.scoring import score_units
from tests.paths import GOLDEN, REPO

ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
KEYS = ("first_cmd_exact", "command_precision", "command_recall", "command_f1")


def golden_file(tmp_path, version: str, mangle=None) -> tuple:
    rows = [dict(r) for r in ROWS if r["scoring_version"] == version]
    blank = [{**r, **{k: 0.123456789 for k in KEYS}} for r in rows]  # wrong values: nothing left to copy from
    if mangle:
        blank = [mangle(r) for r in blank]
    path = tmp_path / f"{version}.json"
    path.write_text(json.dumps({"model": "golden", "model_short": "golden", "eval_path": "golden",
                                "timestamp": "2026-06-12T00:00:00", "aggregate": {}, "per_step": blank}))
    return path, rows


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", "rescore", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("version,scorer", [("corrected_303", "corrected"), ("legacy_386", "legacy")])
def test_cli_reproduces_golden(tmp_path, version, scorer):
    path, rows = golden_file(tmp_path, version)
    out = tmp_path / "out.json"
    proc = run_cli(str(path), "--scorer", scorer, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert len(result["per_step"]) == len(rows)
    for got, want in zip(result["per_step"], rows):
        assert [got[k] for k in KEYS] == [want[k] for k in KEYS]
        assert got["pred_task_complete_true"] == want["pred_task_complete_true"]
    assert result["aggregate"]["steps"] == len(rows)
    assert result["rescored_with"] == scorer


def test_cli_units_stored_as_python_repr(tmp_path):
    def as_repr(row):
        return {**row, "ref_command_units": repr(row["ref_command_units"])}

    path, rows = golden_file(tmp_path, "legacy_386", as_repr)
    out = tmp_path / "out.json"
    assert run_cli(str(path), "--scorer", "legacy", "-o", str(out)).returncode == 0
    result = json.loads(out.read_text())
    assert [r["command_f1"] for r in result["per_step"]] == [r["command_f1"] for r in rows]
    assert result["per_step"][0]["ref_command_units"] == rows[0]["ref_command_units"]


def test_cli_default_is_corrected_even_for_legacy_rows(tmp_path):
    path, rows = golden_file(tmp_path, "legacy_386")
    out = tmp_path / "out.json"
    proc = run_cli(str(path), "-o", str(out))
    assert proc.returncode == 0 and "legacy" in proc.stderr
    empty_both = [r for r in json.loads(out.read_text())["per_step"] if not r["ref_command_units"] and not r["pred_command_units"]]
    assert empty_both and all(r["command_f1"] == 0.0 for r in empty_both)


def test_cli_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = run_cli(str(bad), "-o", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "Traceback" not in proc.stderr
    nosteps = tmp_path / "nosteps.json"
    nosteps.write_text("{}")
    proc = run_cli(str(nosteps), "-o", str(tmp_path / "o.json"))
    assert proc.returncode == 2 and "per_step" in proc.stderr


def test_rescore_many_matches_per_step_and_single():
    results = make_results(n_runs=3, n_steps=25, seed=5)
    many = rescore_many(results, "corrected")
    assert rescore_result(results[1], "corrected") == many[1]
    for res in many:
        for row in res["per_step"]:
            m = score_units(row["pred_command_units"], row["ref_command_units"]).to_dict()
            assert [row[k] for k in KEYS] == [m[k] for k in KEYS]
    assert many[0]["aggregate"] == results[0]["aggregate"]  # synthetic data is scored the same way
