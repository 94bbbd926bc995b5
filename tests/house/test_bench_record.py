"""bench/record.py writes a benchmark's figures with the machine they were measured on, and the benchmarks
page (scripts/docs_gen.py) is built from such files: a rerun changes the page without anyone editing it."""
from __future__ import annotations

import json

from bench.record import Record, machine
from scripts.docs_gen import benchmarks, expand


def test_a_record_holds_figures_checks_and_the_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_BENCH_RESULTS", str(tmp_path))
    record = Record("bench_rescore", packages=("duckdb",), argv=["--runs", "3"])
    record.setting(runs=3)
    record.figure("rescore_many over 3 runs", 0.123456789, "s", note="best of 1")
    record.figure("steps", 909, "steps")
    record.check("identical numbers", True)
    path = record.write()
    assert path == tmp_path / "bench_rescore.json"
    data = json.loads(path.read_text())
    assert data["command"] == "python bench/bench_rescore.py --runs 3"
    assert data["figures"][0] == {"label": "rescore_many over 3 runs", "value": 0.1235, "unit": "s", "note": "best of 1"}
    assert data["figures"][1]["value"] == 909 and data["checks"] == [{"label": "identical numbers", "passed": True}]
    box = data["machine"]
    assert box["cores"] >= 1 and box["packages"]["duckdb"] and len(box["load_average_before"]) == 3
    assert "python" in box and box["memory_gib"] > 0


def test_the_benchmarks_page_follows_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_BENCH_RESULTS", str(tmp_path))
    assert "No figures recorded yet: `python bench/bench_rescore.py" in benchmarks(tmp_path)
    record = Record("bench_rescore", argv=[])
    record.figure("rescore_many over 100 runs x 303 steps", 1.5, "s")
    record.write()
    page = benchmarks(tmp_path)
    assert "rescore_many over 100 runs x 303 steps | 1.5 s" in page
    assert f"{machine()['cores']} cores" in page
    record.figures[0]["value"] = 2.25  # a rerun
    record.write()
    assert "| 2.25 s" in benchmarks(tmp_path)


def test_an_unknown_generated_part_is_refused():
    try:
        expand("<!-- generated: no-such-part -->")
    except ValueError as exc:
        assert "no-such-part" in str(exc) and "benchmarks" in str(exc)
    else:
        raise AssertionError("an unknown marker was left in the page")


def test_a_hostile_label_stays_text(tmp_path, monkeypatch):
    """A figure's label or note is data: markup, table pipes and code fences in it are shown, never run."""
    monkeypatch.setenv("LAB_BENCH_RESULTS", str(tmp_path))
    record = Record("bench_rescore", argv=[])
    record.figure("<script>alert(1)</script> | ```{", 1.0, "s", note="*bold* `code`")
    record.write()
    row = next(line for line in benchmarks(tmp_path).splitlines() if "alert" in line)
    assert "<script>" not in row and "&lt;script&gt;" in row and "\\|" in row
    assert "`" not in row and "*" not in row


def test_a_page_quotes_one_benchmark_s_figures():
    """`<!-- generated: bench-NAME -->` puts bench/bench_NAME.py's last figures in a page (getting-started quotes
    what a first look costs); a name that is no benchmark is refused like any unknown part."""
    page = expand("<!-- generated: bench-rescore -->")
    assert page.startswith("Recorded by `python bench/bench_rescore.py") and "| figure | value | how |" in page
    assert "Machine: " in page and "### " not in page
    for unknown in ("bench-no-such", "bench-record"):
        try:
            expand(f"<!-- generated: {unknown} -->")
        except ValueError as exc:
            assert unknown in str(exc) and "bench-NAME" in str(exc)
        else:
            raise AssertionError(f"{unknown} was accepted")
