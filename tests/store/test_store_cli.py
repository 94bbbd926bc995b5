"""`python -m lab results …` through a real subprocess."""
from __future__ import annotations

import csv
import io
import subprocess
import sys

import pytest

from tests.helpers_store import REPO, golden_rows, make_results_dir, result_from_rows, write_json


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


@pytest.mark.slow  # about 4 s on two cores: the full run, not the fast loop
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


@pytest.mark.slow  # about 6 s on two cores: the full run, not the fast loop
def test_sql_help_and_errors_point_to_the_schema(where):
    """`results sql --help` says where the tables and columns are; a bad column name answers with
    the columns of the tables the query names, a bad table or syntax with the tables there are (one line)."""
    opts, _ = where
    helped = lab("sql", "--help")
    assert helped.returncode == 0 and "results tables" in helped.stdout and "DESCRIBE" in helped.stdout
    tables = [r["name"] for r in csv.DictReader(io.StringIO(lab(*opts, "tables").stdout))]
    columns = lab(*opts, "sql", "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'")
    runs_columns = [r["column_name"] for r in csv.DictReader(io.StringIO(columns.stdout))]
    out = lab(*opts, "sql", "SELECT nope FROM runs")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert 'column "nope" not found' in out.stderr
    assert f"runs has columns {', '.join(runs_columns)};" in out.stderr
    assert "results tables" in out.stderr
    for query in ("SELECT * FROM no_such_table", "SELEC 1"):
        out = lab(*opts, "sql", query)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert f"tables: {', '.join(sorted(tables))};" in out.stderr and "results tables" in out.stderr


def _options_without_help(parser, path=()) -> list[str]:
    import argparse

    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                missing += _options_without_help(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(" ".join((*path, *(action.option_strings or [action.dest]))))
    return missing


def test_every_option_and_argument_has_help():
    """`results import --help` describes PATH; --max-tokens, --temperature, --scorer … say what they do."""
    from lab.cli import COMMANDS, build_parser

    missing = [m for name in COMMANDS for m in _options_without_help(build_parser([name]))]
    assert missing == []
    helped = lab("import", "--help")
    assert helped.returncode == 0 and "result JSON file" in helped.stdout.split("PATH", 2)[-1]
    replay = subprocess.run([sys.executable, "-m", "lab", "replay", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    text = " ".join(replay.stdout.split())
    for option in ("--max-tokens N new tokens per answer", "--temperature T sampling temperature",
                   "--scorer {corrected,legacy} scoring rules"):
        assert option in text, option
