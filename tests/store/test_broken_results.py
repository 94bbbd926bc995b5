"""Broken files under results/ are listed when the store opens (issue 9, defect 11): on the console, by
`python -m lab results`, and as a notice on the Results tab of a real Gradio server."""
from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from lab.settings import Settings
from lab.store import open_store
from lab.serve import create_context, startup_report
from tests.helpers_servers import serve_lab
from tests.paths import GOLDEN, REPO
from tests.helpers_store import make_results_dir

ROWS = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
GOOD = {"model": "m", "model_short": "m", "aggregate": {},
        "per_step": [r for r in ROWS if r["scoring_version"] == "corrected_303"]}
BROKEN = {
    "truncated.json": '{"per_step": [',
    "nan.json": json.dumps({**GOOD, "per_step": [dict(GOOD["per_step"][0], command_f1=float("nan"))]}),
    "not-a-result.json": json.dumps({"hello": "world"}),
}


@pytest.fixture()
def results(tmp_path):
    folder = make_results_dir(tmp_path)
    runs = folder / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "good.json").write_text(json.dumps(GOOD))
    for name, text in BROKEN.items():
        (runs / name).write_text(text)
    return folder


def test_open_store_lists_every_broken_file_with_its_reason(results, tmp_path):
    with open_store(tmp_path / "lab.duckdb", results) as store:
        assert store.scalar("SELECT count(*) FROM runs") == 1
        problems = dict(store.import_problems)
    assert sorted(p.rsplit("/", 1)[-1] for p in problems) == sorted(BROKEN)
    assert any("finite" in why for why in problems.values())


def test_app_console_and_results_tab_list_the_broken_files(results, tmp_path):
    ctx = create_context(Settings(results_dir=results, db_path=tmp_path / "lab.duckdb"))
    lines = startup_report(ctx)
    assert any("3 result file(s) could not be imported" in line for line in lines)
    for name in BROKEN:
        assert any(name in line for line in lines)
    with serve_lab(ctx) as (_demo, url):
        config = httpx.get(url + "config", timeout=30).text
        assert "lab-broken-results" in config and "3 result files not imported" in config
        for name in BROKEN:
            assert name in config
    ctx.store.close()


def test_results_cli_warns_about_broken_files(results, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lab", "results", "--results", str(results), "--db",
                           str(tmp_path / "lab.duckdb"), "sql", "SELECT count(*) AS n FROM runs"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert proc.stdout.split() == ["n", "1"]
    for name in BROKEN:
        assert "warning: not imported: " in proc.stderr and name in proc.stderr
