"""`python -m lab results …` through a real subprocess."""
from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

from tests.test_store_common import REPO, golden_rows, make_results_dir, result_from_rows, write_json


def lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab", "results", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    return ["--db", str(root / "lab.duckdb"), "--results", str(make_results_dir(root))], root


def test_sql_prints_csv(where):
    opts, _ = where
    out = lab(*opts, "sql", "SELECT count(*) FROM leaderboard WHERE in_first_56")
    assert out.returncode == 0, out.stderr
    assert list(csv.reader(io.StringIO(out.stdout))) == [["count_star()"], ["56"]]


def test_import_then_query_and_tables(where, shared_dir):
    opts, root = where
    path = write_json(root / "in" / "golden.json", result_from_rows(golden_rows(shared_dir, "corrected_303"), "org/Qwen3.5-2B-X"))
    out = lab(*opts, "import", str(path))
    assert out.returncode == 0, out.stderr
    assert "1 added" in out.stdout
    out = lab(*opts, "import", str(path))
    assert "0 added, 1 unchanged" in out.stdout
    n_steps = len(golden_rows(shared_dir, "corrected_303"))
    out = lab(*opts, "sql", "SELECT display_name, steps FROM runs")
    assert list(csv.DictReader(io.StringIO(out.stdout))) == [{"display_name": "org/Qwen3.5-2B-X", "steps": str(n_steps)}]
    tables = {r["name"]: r for r in csv.DictReader(io.StringIO(lab(*opts, "tables").stdout))}
    assert tables["leaderboard"]["rows"] == "116" and tables["tblite"]["rows"] == "8"
    assert int(tables["steps"]["rows"]) == n_steps


def test_errors_are_one_line_with_exit_codes(where, tmp_path):
    opts, _ = where
    out = lab(*opts, "sql", "SELECT nope FROM leaderboard")
    assert out.returncode == 2 and out.stderr.startswith("error: SQL error") and "Traceback" not in out.stderr
    bad = tmp_path / "broken.json"
    bad.write_text("{", encoding="utf-8")
    out = lab(*opts, "import", str(bad))
    assert out.returncode == 1 and f"FAILED {bad}" in out.stdout


def test_rebuild(where):
    opts, _ = where
    out = lab(*opts, "rebuild")
    assert out.returncode == 0, out.stderr
    assert "loaded leaderboard: 116 rows" in out.stdout
